//go:build !linux

package approvals

func procStartOK(int) (uint64, bool) { return 0, false }
func procStart(int) uint64           { return 0 }

// procCheckable reports whether holders can be checked here: not without /proc.
func procCheckable() bool { return false }
