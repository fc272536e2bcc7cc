package cli

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestExitWithParentAlreadyGone: a parent that ended before conch could
// watch it (this process was reparented since it started) is an error,
// not a server that outlives it in silence.
func TestExitWithParentAlreadyGone(t *testing.T) {
	saved := startPPID
	t.Cleanup(func() {
		startPPID = saved
		unix.Prctl(unix.PR_SET_PDEATHSIG, 0, 0, 0, 0)
	})
	if err := exitWithParent(nil); err != nil {
		t.Fatalf("with the parent alive: %v", err)
	}
	startPPID = os.Getppid() + 1 // the parent that started "us" is not the one we have
	if err := exitWithParent(nil); err != errParentGone {
		t.Fatalf("after a reparent: %v, want errParentGone", err)
	}
}
