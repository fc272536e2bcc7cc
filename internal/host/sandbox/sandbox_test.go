package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/config"
)

func TestViewMapping(t *testing.T) {
	s := (&config.Config{}).SandboxFor("main")
	v := NewView("/srv/proj", s, "bwrap")
	if in, ok := v.MapIn("/srv/proj/a/b"); !ok || in != "/srv/proj/a/b" {
		t.Fatalf("same: %q %v", in, ok)
	}
	s.WorkspacePath = "/workspace"
	v = NewView("/srv/proj", s, "bwrap")
	if in, ok := v.MapIn("/srv/proj/a"); !ok || in != "/workspace/a" {
		t.Fatalf("mapped in: %q %v", in, ok)
	}
	if out, ok := v.MapOut("/workspace/a"); !ok || out != "/srv/proj/a" {
		t.Fatalf("mapped out: %q %v", out, ok)
	}
	for _, p := range []string{"/srv/project", "/srv", "/workspace/../etc"} {
		if _, ok := v.MapIn(p); ok {
			t.Errorf("%s mapped in", p)
		}
		if _, ok := v.MapOut(p); ok {
			t.Errorf("%s mapped out", p)
		}
	}
	if NewView("/srv/proj", (&config.Config{}).SandboxFor("m"), "docker").Inside != "/workspace" {
		t.Fatal("docker always mounts /workspace")
	}
}

func TestUnsafeWorkspaceAndBinds(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "conch")
	os.MkdirAll(home, 0o700)
	uh, _ := os.UserHomeDir()
	for _, ws := range []string{"/", root, home, uh} {
		if err := WorkspaceSafe(home, ws); err == nil {
			t.Errorf("workspace %s accepted", ws)
		}
	}
	if err := WorkspaceSafe(home, t.TempDir()); err != nil {
		t.Errorf("a plain directory refused: %v", err)
	}
	for _, b := range []string{"/", "/etc", "/proc", "/sys", "/dev", "/run", "/var/run/docker.sock", uh, home, root} {
		if err := CheckBind(home, b); err == nil {
			t.Errorf("bind %s accepted", b)
		}
	}
	if err := CheckBind(home, "/usr/share"); err != nil {
		t.Errorf("bind /usr/share refused: %v", err)
	}
}

// TestAutoOrder: backend auto tries bwrap, docker, landlock on Linux and
// Seatbelt, then docker, on macOS; every name it tries is a backend
// config accepts and is built for that OS; and a configured backend of
// another OS fails closed, saying where it exists.
func TestAutoOrder(t *testing.T) {
	want := map[string][]string{"linux": {"bwrap", "docker", "landlock"}, "darwin": {"seatbelt", "docker"}}
	for goos, w := range want {
		got := AutoOrder(goos)
		if !slices.Equal(got, w) {
			t.Errorf("AutoOrder(%s) = %v, want %v", goos, got, w)
		}
		for _, b := range got {
			if !slices.Contains(config.SandboxBackends(), b) {
				t.Errorf("%s: %s is not a value of sandbox.backend", goos, b)
			}
			if os := config.SandboxBackendOS(b); os != "" && os != goos {
				t.Errorf("%s: auto tries %s, built for %s", goos, b, os)
			}
		}
	}
	if AutoOrder("plan9") != nil {
		t.Error("an OS without backends has an auto order")
	}
	for _, b := range config.SandboxBackends() {
		goos := config.SandboxBackendOS(b)
		if goos == "" || goos == runtime.GOOS {
			continue
		}
		_, err := For(context.Background(), config.SandboxSettings{Backend: b})
		if err == nil || !strings.Contains(err.Error(), "exists only on "+goos) {
			t.Errorf("backend %s (%s) here: %v", b, goos, err)
		}
	}
}
