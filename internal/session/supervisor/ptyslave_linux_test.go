package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// The supervisor under test holds its PTY slave, as on macOS, when the
// test asks (holdPTYSlave is a constant there).
func init() {
	if os.Getenv("CONCH_TEST_HOLD_PTY_SLAVE") == "1" {
		holdPTYSlave = true
	}
}

// TestPTYSlaveHeld runs macOS's PTY path on Linux, and Linux's: with the
// slave held, the supervisor keeps a descriptor of the command's
// terminal while the command runs (and without, none), and either way a
// command that prints much and exits at once has every byte journaled
// and its session ends. What this cannot show here is macOS's discarding
// of unread output itself (not yet run on macOS).
func TestPTYSlaveHeld(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			home := t.TempDir()
			counter++
			spec := testDefaults(home, proto.Spec{ID: fmt.Sprintf("t%d", counter), PTY: true,
				Argv: []string{"/bin/sh", "-c", "echo ready; while [ ! -e GO ]; do sleep 0.01; done; seq 1 20000; echo END"}})
			spec.Socket = filepath.Join(home, spec.ID+".sock")
			env := []string{"PATH=" + os.Getenv("PATH"), fmt.Sprintf("CONCH_TEST_HOLD_PTY_SLAVE=%d", map[bool]int{false: 0, true: 1}[hold])}
			h, err := Launch([]string{os.Args[0], "supervise"}, home, spec, env, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			dir := proto.SessionDir(home, spec.ID)
			output := func() string {
				var b strings.Builder
				journal.Read(proto.JournalDir(dir), 0, func(c journal.Chunk) error { b.Write(c.Data); return nil })
				return b.String()
			}
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(output(), "ready"); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the command never started")
				}
			}
			if got := slavesOf(t, h.SupervisorPID); got != hold {
				t.Errorf("the supervisor holds a PTY slave: %v, want %v", got, hold)
			}
			os.WriteFile(filepath.Join(home, "GO"), nil, 0o600)
			ex := final(t, h, 30*time.Second)
			if ex.State != proto.StateExited || ex.ExitCode == nil || *ex.ExitCode != 0 {
				t.Fatalf("exit %+v", ex)
			}
			out := strings.ReplaceAll(output(), "\r\n", "\n")
			if !strings.Contains(out, "\n19999\n20000\nEND\n") || strings.Count(out, "\n") < 20002 {
				t.Errorf("output lost: %d lines, ends %q", strings.Count(out, "\n"), out[max(0, len(out)-40):])
			}
		})
	}
}

// slavesOf reports whether process pid has a /dev/pts terminal open.
func slavesOf(t *testing.T, pid int) bool {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); strings.HasPrefix(l, "/dev/pts/") {
			return true
		}
	}
	return false
}
