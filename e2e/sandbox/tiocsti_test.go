//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
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

// TestSandboxPTYSignalsStayInside: without bwrap's --new-session, a PTY
// run's terminal signals must still reach only the sandbox's processes:
// C-c, C-z and C-\ typed into a non-interactive shell's PTY go to the
// command's process group, never to bwrap outside (which would die of
// SIGINT or SIGQUIT, or stop on SIGTSTP, and take the run down with it
// instead of letting the command decide). The command traps all three and
// exits 7 on the third.
func TestSandboxPTYSignalsStayInside(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, nil)
	c := se.c
	cmd := `n=0; for s in INT TSTP QUIT; do trap 'n=$((n+1)); echo GOT-'$s'-$n; [ $n = 3 ] && exit 7' $s; done; echo READY; while :; do sleep 0.05; done`
	r := c.Exec(map[string]any{"command": cmd, "pty": true, "background": true})
	id := r.Str("sessionId")
	if id == "" || r.Str("host") != "sandbox" {
		t.Fatalf("background pty: %s %v", r.Text, r.D)
	}
	for i, key := range []string{"", "C-c", "C-z", `C-\`} {
		if key != "" {
			c.Process(map[string]any{"action": "send-keys", "sessionId": id, "keys": []any{key}})
		}
		want := "READY"
		if i > 0 {
			want = fmt.Sprintf("-%d", i)
		}
		e2etest.Eventually(t, 10*time.Second, func() string {
			if l := c.Process(map[string]any{"action": "log", "sessionId": id}); !strings.Contains(l.Text, want) {
				return fmt.Sprintf("after %q: want %q in %q", key, want, l.Text)
			}
			return ""
		})
	}
	p := c.WaitEnd(id, 10*time.Second)
	if p.Num("exitCode") != 7 {
		t.Fatalf("end: want exit 7 from the command, got %s %v", p.Text, p.D)
	}
}
