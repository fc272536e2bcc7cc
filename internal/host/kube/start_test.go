package kube

import (
	"os"
	"path/filepath"
	"testing"

	nodehub "github.com/conchsh/conch/internal/node/hub"
)

// TestNewWritesNothing: starting the backend on a home that never
// configures kubernetes writes no kubernetes file, so a home where that
// write would fail (a full disk; here a file where the sandboxes
// directory goes) starts, and the failure is reported only by the first
// pod, naming what it could not write.
func TestNewWritesNothing(t *testing.T) {
	home := t.TempDir()
	hub, err := nodehub.New(nodehub.Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	if err := os.WriteFile(filepath.Join(home, "sandboxes"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := New(home, hub, nil)
	if err != nil {
		t.Fatalf("New on a home without kubernetes: %v", err)
	}
	defer m.Close()
	if _, err := os.Stat(filepath.Join(home, "sandboxes", "kube-gateway-id")); err == nil {
		t.Error("New wrote kube-gateway-id")
	}
	if _, err := m.gatewayID(); err == nil {
		t.Error("gatewayID with no room for its file: no error")
	}
	os.Remove(filepath.Join(home, "sandboxes"))
	id, err := m.gatewayID()
	if err != nil || len(id) != 12 {
		t.Fatalf("gatewayID after the home was fixed: %q %v", id, err)
	}
	if again, _ := m.gatewayID(); again != id {
		t.Errorf("gateway id changed: %s, then %s", id, again)
	}
}
