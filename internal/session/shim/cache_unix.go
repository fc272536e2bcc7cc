//go:build unix

package shim

import "syscall"

// buildAttr puts the background build in its own process group, so a
// terminal's ^C to conch does not cut it.
func buildAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// lowerPriority makes the background build yield to the commands conch runs.
func lowerPriority(pid int) { syscall.Setpriority(syscall.PRIO_PROCESS, pid, 10) }
