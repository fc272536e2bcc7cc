package backends_test

import (
	"context"
	"testing"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
	_ "github.com/conchsh/conch/internal/host/sandbox/backends"
)

// TestEveryBackendRegistered: importing this package makes each backend
// known under its name, docker with its container administration, and
// an unknown name stays refused.
func TestEveryBackendRegistered(t *testing.T) {
	for _, name := range osBackends {
		b := sandbox.New(name, config.SandboxSettings{})
		if b == nil {
			t.Fatalf("backend %s is not registered", name)
		}
		if b.Name() != name {
			t.Fatalf("sandbox.New(%q) made a %s backend", name, b.Name())
		}
		if b2 := sandbox.New(name, config.SandboxSettings{}); b2 == b {
			t.Fatalf("sandbox.New(%q) returned the same instance twice: its probe would be cached", name)
		}
	}
	if b := sandbox.New("docker", config.SandboxSettings{}); b != nil && !implementsContainers(b) {
		t.Fatal("docker does not implement sandbox.Containers")
	}
	if b := sandbox.New("nope", config.SandboxSettings{}); b != nil {
		t.Fatalf("an unknown backend name made %v", b)
	}
	if _, err := sandbox.For(context.Background(), config.SandboxSettings{Backend: "nope"}); err == nil {
		t.Fatal("sandbox.For accepted an unknown backend")
	}
}

func implementsContainers(b sandbox.Backend) bool {
	_, ok := b.(sandbox.Containers)
	return ok
}
