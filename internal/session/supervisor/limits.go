package supervisor

import "strconv"

// oomReason is the reason of a session the OOM killer ended.
func oomReason(limit float64) string {
	if limit <= 0 {
		return "Command killed: out of memory (the kernel's OOM killer ended it)"
	}
	return "Command killed: out of memory (the session's memory limit is " + strconv.FormatFloat(limit, 'f', -1, 64) + " bytes)"
}
