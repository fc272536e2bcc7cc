package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestFreshHomeFirstCallResolvesLikeLater: the first call on a fresh home
// finds the programs of the login-shell PATH, as every later call does,
// when another home of the user already probed the same shell set-up:
// the probe's result is shared through the user's cache directory. The
// fake login shell's profile blocks on the fresh home's start (a probe
// would not finish in the call's window), so only the shared result can
// give the first call the login PATH.
func TestFreshHomeFirstCallResolvesLikeLater(t *testing.T) {
	if b, err := os.ReadFile("/etc/shells"); err != nil || !strings.Contains("\n"+string(b)+"\n", "\n/bin/sh\n") {
		t.Skip("/bin/sh is not a login shell listed in /etc/shells here")
	}
	fake := t.TempDir()
	if r, err := filepath.EvalSymlinks(fake); err == nil {
		fake = r
	}
	bin := filepath.Join(fake, "login-bin")
	os.Mkdir(bin, 0o755)
	if err := os.WriteFile(filepath.Join(bin, "conch-login-tool"), []byte("#!/bin/sh\necho login-tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(fake, "release")
	profile := `while [ ! -e "$HOME/release" ]; do sleep 0.05; done
PATH="$HOME/login-bin:$PATH"; export PATH
`
	if err := os.WriteFile(filepath.Join(fake, ".profile"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + fake, "SHELL=/bin/sh", "XDG_CACHE_HOME=" + filepath.Join(fake, ".cache"), "CONCH_SHELL_ENV_TIMEOUT_MS=300000"}
	t.Cleanup(func() { os.WriteFile(release, nil, 0o644) })

	// The user's first home probes (released at once).
	os.WriteFile(release, nil, 0o644)
	first := e2etest.StartConchEnv(t, e2etest.NewHome(t, ""), env)
	if r := first.Exec(map[string]any{"command": "conch-login-tool", "yieldMs": 5000}); r.Text != "login-tool" {
		t.Fatalf("first home: %q", r.Text)
	}
	first.Close()

	// A fresh home, with a probe that would block: the first call still
	// finds the tool, with no warning.
	os.Remove(release)
	c := e2etest.StartConchEnv(t, e2etest.NewHome(t, ""), env)
	start := time.Now()
	r := c.Exec(map[string]any{"command": "command -v conch-login-tool || echo no-tool", "yieldMs": 2000})
	if r.Text != filepath.Join(bin, "conch-login-tool") {
		t.Fatalf("fresh home's first call (%v): %q, want the login PATH's tool", time.Since(start), r.Text)
	}
}
