package cli

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// parentIsGoTool reports whether the process that started conch is the
// go command: `go run ./cmd/conch serve` (its name, from sysctl
// kern.proc.pid). Not yet run on macOS.
func parentIsGoTool() bool {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", startPPID)
	if err != nil {
		return false
	}
	comm := kp.Proc.P_comm[:]
	n := 0
	for n < len(comm) && comm[n] != 0 {
		n++
	}
	return string(comm[:n]) == "go"
}

// exitWithParent sends this process SIGTERM when its parent ends, and
// returns errParentGone when the parent already ended. macOS has no
// parent-death signal: a kqueue watches the parent for NOTE_EXIT (which
// works for any visible process), and a goroutine turns the event into
// the signal (which stops the process, so stop is not called). Not yet
// run on macOS.
func exitWithParent(stop func()) error {
	kq, err := unix.Kqueue()
	if err != nil {
		return fmt.Errorf("kqueue: %w", err)
	}
	ev := unix.Kevent_t{Ident: uint64(startPPID), Filter: unix.EVFILT_PROC, Flags: unix.EV_ADD | unix.EV_ONESHOT, Fflags: unix.NOTE_EXIT}
	if _, err := unix.Kevent(kq, []unix.Kevent_t{ev}, nil, nil); err != nil {
		unix.Close(kq)
		if errors.Is(err, unix.ESRCH) {
			return errParentGone
		}
		return fmt.Errorf("kevent(NOTE_EXIT): %w", err)
	}
	// Registered on the pid: a parent that ended before (and whose pid
	// went to another process) is found here.
	if os.Getppid() != startPPID {
		unix.Close(kq)
		return errParentGone
	}
	go func() {
		defer unix.Close(kq)
		out := make([]unix.Kevent_t, 1)
		for {
			n, err := unix.Kevent(kq, nil, out, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err == nil && n > 0 {
				syscall.Kill(os.Getpid(), syscall.SIGTERM)
			}
			return
		}
	}()
	return nil
}
