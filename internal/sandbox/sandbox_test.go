package sandbox

import (
	"os"
	"path/filepath"
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
