package approvals

import (
	"bytes"
	"os"
	"strconv"
)

// procStartOK returns the start time of pid in clock ticks since boot (field 22 of
// /proc/<pid>/stat); ok is false if there is no such live process.
func procStartOK(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 20 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, false
	}
	st, err := strconv.ParseUint(string(f[19]), 10, 64)
	return st, err == nil
}

func procStart(pid int) uint64 {
	st, _ := procStartOK(pid)
	return st
}

// procCheckable reports whether holders can be checked here.
func procCheckable() bool { return true }
