//go:build unix

package cli

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlReadTermios)
	return err == nil
}

// descriptorLimit is this process's limit of open descriptors
// (RLIMIT_NOFILE), 1024 when it cannot be read.
func descriptorLimit() int {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur > 0 && rl.Cur < 1<<30 {
		return int(rl.Cur)
	}
	return 1024
}

// signalNum is the number of the signal named name ("SIGTERM"), or 0.
func signalNum(name string) int { return int(unix.SignalNum(name)) }
