//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/e2etest"
)

// TestSandboxTIOCSTI: no sandboxed command can push keystrokes into a
// terminal (TIOCSTI, CVE-2017-5226; TIOCLINUX's paste), in bwrap and in
// landlock, with and without a PTY: the ioctl on the inherited fd 0 and on
// /dev/tty fails with EPERM whatever the high 32 bits of the request (the
// kernel drops them; a filter comparing the whole 64-bit value was
// bypassed that way). Without a PTY the command has no controlling
// terminal at all (/dev/tty: ENXIO), so bwrap's --new-session has nothing
// left to protect. On the code before the filter refused these requests
// TIOCSTI on the PTY went through ("ok").
func TestSandboxTIOCSTI(t *testing.T) {
	reqs := []string{"0x5412", "0x100005412", "0xffffffff00005412", "0x541c", "0x10000541c"}
	for _, backend := range []string{"bwrap", "landlock"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "bwrap" {
				needBwrap(t)
			} else {
				needLandlock(t)
			}
			t.Parallel()
			se := newSandbox(t, map[string]any{"backend": backend})
			exe := filepath.Join(se.ws, "conch")
			if data, err := os.ReadFile(e2etest.ConchBin); err != nil || os.WriteFile(exe, data, 0o755) != nil {
				t.Fatalf("copy conch: %v", err)
			}
			var cmd strings.Builder
			for _, r := range reqs {
				fmt.Fprintf(&cmd, `echo "req %s $(./conch sandbox-init --probe tiocsti %s)"; `, r, r)
			}
			for _, pty := range []bool{false, true} {
				r := se.c.Exec(map[string]any{"command": cmd.String(), "pty": pty})
				sb, _ := r.D["sandbox"].(map[string]any)
				if r.Str("host") != "sandbox" || sb["backend"] != backend || r.Str("status") != "completed" {
					t.Fatalf("pty=%v: not a completed %s run: %s %v", pty, backend, r.Text, r.D)
				}
				tty := "tty=ENXIO"
				if pty {
					tty = "tty=EPERM"
				}
				for _, req := range reqs {
					want := "req " + req + " fd0=EPERM " + tty
					if !strings.Contains(r.Text, want) {
						t.Errorf("pty=%v: want %q in\n%s", pty, want, r.Text)
					}
				}
			}
		})
	}
}
