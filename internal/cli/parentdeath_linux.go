package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// parentIsGoTool reports whether the process that started conch is the
// go command: `go run ./cmd/conch serve`. go run does not pass SIGTERM on
// to the program it runs; killed, it leaves the program running.
func parentIsGoTool() bool {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(startPPID) + "/exe")
	return err == nil && filepath.Base(exe) == "go"
}

// exitWithParent has the kernel send this process SIGTERM when its parent
// ends (PR_SET_PDEATHSIG), and returns errParentGone when the parent
// already ended. The kernel sends the signal when the parent thread that
// forked this process exits; the go command, like any Go program, keeps
// its threads until the process ends, so for go run that is the process's
// end. The setting belongs to this process's thread that made the call;
// Go never ends the threads of goroutines that are not locked to them, so
// it lasts. The signal stops the process, so stop is not called.
func exitWithParent(stop func()) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
	}
	// A parent that ended before the prctl sent nothing: this process
	// was reparented already.
	if os.Getppid() != startPPID {
		return errParentGone
	}
	return nil
}
