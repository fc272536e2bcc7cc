package shim_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/session/shim"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// shims builds conch-shim twice, once as it ships and once claiming
// protocol 999 (a shim of another version), and returns their paths.
func shims(t *testing.T) (good, skewed string) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "conch-shim-test-")
		if buildErr != nil {
			return
		}
		for _, b := range []struct{ out, ldflags string }{
			{"good/conch-shim", ""},
			{"skewed/conch-shim", "-X github.com/conchsh/conch/internal/session/shim.protocol=999"},
		} {
			out, err := exec.Command("go", "build", "-ldflags", b.ldflags, "-o", filepath.Join(buildDir, b.out), "github.com/conchsh/conch/cmd/conch-shim").CombinedOutput()
			if err != nil {
				buildErr = errors.New(string(out))
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("build conch-shim: %v", buildErr)
	}
	return filepath.Join(buildDir, "good", "conch-shim"), filepath.Join(buildDir, "skewed", "conch-shim")
}

// scaled is the ready timeout of a supervisor start: generous, as a loaded
// machine starts processes slowly.
func scaled(t *testing.T) time.Duration {
	if d, ok := t.Deadline(); ok {
		return time.Until(d) / 2
	}
	return time.Minute
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// TestHandshake: a shim of this protocol passes; one of another protocol,
// or a program that does not answer the handshake (a shim from before
// it), is refused with a SkewError that names both versions.
func TestHandshake(t *testing.T) {
	good, skewed := shims(t)
	ctx := context.Background()
	if err := shim.Handshake(ctx, good); err != nil {
		t.Fatalf("handshake with a shim of this protocol: %v", err)
	}
	err := shim.Handshake(ctx, skewed)
	var se *shim.SkewError
	if !errors.Is(err, shim.ErrSkew) || !errors.As(err, &se) || se.Theirs != "999" || se.Ours != shim.Protocol() || se.Path != skewed {
		t.Fatalf("handshake with a protocol-999 shim: %v (%+v)", err, se)
	}
	tr, lerr := exec.LookPath("true")
	if lerr != nil {
		t.Skip("no true(1)")
	}
	if err := shim.Handshake(ctx, tr); !errors.As(err, &se) || se.Theirs != "" {
		t.Fatalf("handshake with a program that does not answer it: %v", err)
	}
	if err := shim.Handshake(ctx, filepath.Join(t.TempDir(), "missing")); err == nil || errors.Is(err, shim.ErrSkew) {
		t.Fatalf("handshake with no program: %v, want a run error", err)
	}
}

// TestSuperviseRefusesAnotherProtocol: a shim replaced by one of another
// version while conch runs refuses every supervisor conch starts with it,
// and the engine's side of the pipe sees shim.ErrSkew (a code on the
// ready report, not a message to read); the shim of this version runs the
// same spec.
func TestSuperviseRefusesAnotherProtocol(t *testing.T) {
	good, skewed := shims(t)
	home := t.TempDir()
	spec := proto.Spec{ID: "s1", Argv: []string{"/bin/sh", "-c", "exit 0"}, Dir: home, Stdin: "closed", Socket: filepath.Join(home, "s1.sock"), NoCgroup: true}
	prog := shim.Program{Path: skewed}
	env := append(os.Environ(), shim.SuperviseEnv())
	h, err := supervisor.Launch(prog.SuperviseArgv(), home, spec, env, scaled(t))
	if !errors.Is(err, shim.ErrSkew) {
		t.Fatalf("supervise under a protocol-999 shim: %v, %v; want shim.ErrSkew", h, err)
	}
	prog = shim.Program{Path: good}
	h, err = supervisor.Launch(prog.SuperviseArgv(), home, spec, env, scaled(t))
	if err != nil {
		t.Fatalf("supervise under this protocol's shim: %v", err)
	}
	defer h.Close()
	for ev := range h.Events {
		if ev.Exit != nil {
			if ev.Exit.ExitCode == nil || *ev.Exit.ExitCode != 0 {
				t.Fatalf("true ended with %+v", ev.Exit)
			}
			return
		}
	}
	t.Fatal("events ended without an exit")
}
