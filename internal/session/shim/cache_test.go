package shim

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGoRunBuildsTheShim: a conch that `go run` built (an executable
// named conch in a go-build directory) running inside this checkout finds
// no shim, starts one build of it into the user's cache, keyed by its own
// build ID, and finds it there once built; a second conch meanwhile does
// not start a second build. A conch built elsewhere never builds.
func TestGoRunBuildsTheShim(t *testing.T) {
	if testing.Short() {
		t.Skip("builds conch-shim")
	}
	tmp := t.TempDir()
	// The go command's own cache stays where it is (it would follow
	// XDG_CACHE_HOME and rebuild everything).
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "cache"))
	self := filepath.Join(tmp, "go-build123", "b001", "exe", "conch")
	copyFile(t, os.Args[0], self) // an ELF with a Go build ID, like conch
	if p, building := fromCache(context.Background(), filepath.Join(tmp, "conch")); p != "" || building {
		t.Fatalf("an installed conch: cache %q, building %v; want neither", p, building)
	}
	p, building := fromCache(context.Background(), self)
	if p != "" || !building {
		t.Fatalf("first start: cache %q, building %v; want a build started", p, building)
	}
	if p, building := fromCache(context.Background(), self); p != "" || !building {
		t.Fatalf("second start during the build: cache %q, building %v", p, building)
	}
	// This process started the build, as Locate does for a conch that
	// found no shim: Current switches to the shim once it is built.
	if Locate().Fast() {
		t.Skip("a conch-shim is installed where this test binary finds it")
	}
	pendingMu.Lock()
	pending = cachePath(self)
	pendingMu.Unlock()
	deadline := time.Now().Add(5 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-10 * time.Second)
	}
	for {
		if p, _ = fromCache(context.Background(), self); p != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shim was not built")
		}
		time.Sleep(100 * time.Millisecond) // polling a file another process writes
	}
	if err := Handshake(context.Background(), p); err != nil {
		t.Fatalf("the built shim: %v", err)
	}
	if c := Current(); c.Path != p || c.From != FromCache || !c.Fast() {
		t.Fatalf("Current after the build: %+v, want the built shim %s", c, p)
	}
	if filepath.Dir(filepath.Dir(p)) != filepath.Join(tmp, "cache", "conch", "shim") {
		t.Fatalf("built at %s, want under the user cache", p)
	}
}

func TestGoRunBuilt(t *testing.T) {
	for path, want := range map[string]bool{
		"/tmp/go-build2270/b001/exe/conch":       true,
		"/tmp/go-build2270/b001/exe/conchbench":  false,
		"/usr/local/bin/conch":                   false,
		"/tmp/conch-e2e-1/conch":                 false,
		"/home/u/.cache/go-build/ab/exe/conch-x": false,
	} {
		if got := goRunBuilt(path); got != want {
			t.Errorf("goRunBuilt(%s) = %v, want %v", path, got, want)
		}
	}
}

// TestLocateEnv: CONCH_SHIM names the shim (refused on a failed
// handshake, with the reason in Note) or "self".
func TestLocateEnv(t *testing.T) {
	t.Setenv("CONCH_SHIM", "self")
	if p := locate(context.Background()); p.From != FromSelf || p.Note != "" || p.Fast() {
		t.Fatalf("CONCH_SHIM=self: %+v", p)
	}
	bad := filepath.Join(t.TempDir(), "conch-shim")
	t.Setenv("CONCH_SHIM", bad)
	if p := locate(context.Background()); p.From != FromSelf || p.Note == "" {
		t.Fatalf("CONCH_SHIM=%s (missing): %+v", bad, p)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
