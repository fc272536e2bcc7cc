package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/host/shellenv"
	"github.com/conchsh/conch/internal/session/shim/entry"
	"github.com/conchsh/conch/internal/session/supervisor"
)

// The test binary doubles as conch-shim (the supervisor, and the
// sandbox init: a sandbox's Command may start os.Executable() as
// `sandbox-init --hold`, which would otherwise run the tests again).
func TestMain(m *testing.M) {
	if code, ok := entry.Main(os.Args[1:]); ok {
		os.Exit(code)
	}
	if len(os.Args) > 2 && os.Args[1] == "supervise-limited" {
		// A supervisor whose descriptor limit is os.Args[2].
		n, _ := strconv.Atoi(os.Args[2])
		setDescriptorLimit(n)
		os.Exit(supervisor.Main(os.Args[3:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "emfile-engine" {
		emfileEngine(os.Args[2:]) // never returns
	}
	if len(os.Args) > 1 && os.Args[1] == "approval-engine" {
		approvalEngine(os.Args[2:]) // never returns
	}
	if len(os.Args) > 1 && os.Args[1] == "approval-engine-crash" {
		approvalEngineCrash(os.Args[2:]) // never returns
	}
	if dir, err := os.MkdirTemp("", "engine-test-"); err == nil {
		cache := filepath.Join(dir, "login-path.json")
		shellenv.StartLoginProbe(cache).Wait(-1)
		loginCache, _ = os.ReadFile(cache)
		os.RemoveAll(dir)
	}
	os.Exit(m.Run())
}

// loginCache is the login-shell probe's result for this process's
// environment, probed once: seedLoginCache puts it in a test's home so
// that the tests' first calls do not depend on how fast the developer's
// login shell is (loginpath.go).
var loginCache []byte

func seedLoginCache(home string) {
	if loginCache != nil {
		os.MkdirAll(filepath.Dir(loginCachePath(home)), 0o700)
		os.WriteFile(loginCachePath(home), loginCache, 0o600)
	}
}

func newEngine(t testing.TB) *Engine {
	t.Helper()
	home := t.TempDir()
	seedLoginCache(home)
	e, err := New(Options{Home: home, SupervisorArgv: []string{os.Args[0], "supervise"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestExecRoundTrip(t *testing.T) {
	e := newEngine(t)
	r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
	d := r.Details.(*apitype.ExecDetails)
	if r.Text != "hi" || d.Status != "completed" || *d.ExitCode != 0 {
		t.Fatalf("%q %+v", r.Text, d)
	}
	if ids := e.Sessions(); len(ids) != 0 {
		t.Fatalf("foreground session kept: %v", ids)
	}
}

// BenchmarkExecTrue measures exec {command:"true"} through the engine,
// without MCP; BenchmarkShTrue is the baseline of os/exec running sh -c.
func BenchmarkExecTrue(b *testing.B) {
	e := newEngine(b)
	for b.Loop() {
		r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "true"})
		if d, ok := r.Details.(*apitype.ExecDetails); !ok || d.Status != "completed" {
			b.Fatal(r.Text)
		}
	}
}

func BenchmarkShTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestProcessAfterClose: a closed engine says it is shutting down; it
// does not claim that its sessions (which keep running) are gone.
func TestProcessAfterClose(t *testing.T) {
	e := newEngine(t)
	yes := true
	r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "sleep 30", Background: &yes})
	id := r.Details.(*apitype.ExecDetails).SessionID
	e.Process(context.Background(), "main", apitype.ProcessParams{Action: "kill", SessionID: id})
	e.Close()
	r = e.Process(context.Background(), "main", apitype.ProcessParams{Action: "poll", SessionID: id})
	if r.Text != "conch engine is shutting down." {
		t.Fatalf("poll after Close: %q", r.Text)
	}
}
