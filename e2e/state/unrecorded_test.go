package state

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestUnrecordedEndIsTold: a session whose supervisor dies while its
// directory cannot be written (a read-only bind mount over it) ends lost,
// and since the gateway could not write that end state to exit.json, the
// poll result says the end was not recorded instead of claiming a
// recorded end. Needs root for the mount.
func TestUnrecordedEndIsTold(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	t.Cleanup(func() { e2etest.KillLeftovers(t, home) })
	r := c.Exec(map[string]any{"command": "sleep 907.3", "background": true})
	id := r.Str("sessionId")
	pid := e2etest.SupervisorPID(t, home, id)

	dir := filepath.Join(home, "sessions", id)
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount the session directory (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v %s", err, out)
	}

	// The supervisor dies without recording an end (as in an OOM kill).
	syscall.Kill(pid, syscall.SIGKILL)
	var text string
	e2etest.Eventually(t, 30*time.Second, func() string {
		p := c.Process(map[string]any{"action": "poll", "sessionId": id})
		text = p.Text
		if p.Str("state") != "lost" {
			return "poll: " + p.Text
		}
		return ""
	})
	if !strings.Contains(text, "this end state could not be recorded on disk") || !strings.Contains(text, "read-only file system") {
		t.Fatalf("the lost end, not written, is not told: %q", text)
	}
	if left := e2etest.Pgrep("sleep 907.3"); len(left) != 0 {
		t.Fatalf("the lost session's process was not swept: %v", left)
	}
}
