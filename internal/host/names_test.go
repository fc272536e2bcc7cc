package host

import (
	"context"
	"runtime"
	"slices"
	"testing"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

// TestHostListsMatchRegistry: the names config accepts for
// tools.exec.host (which every other list of host names is derived from)
// are exactly the hosts an agent can select from the registry, and the
// values of sandbox.backend are "auto" and exactly the registered
// backends, local or remote, with those of other OSes
// (config.SandboxBackendOS). A new host or backend registered without its
// name in config, or a name left in config after its host is gone, fails
// here.
func TestHostListsMatchRegistry(t *testing.T) {
	hosts := config.HostValues()
	slices.Sort(hosts)
	if got := Selectable(); !slices.Equal(got, hosts) {
		t.Errorf("selectable hosts %v, config.HostValues %v", got, hosts)
	}
	backends := slices.DeleteFunc(config.SandboxBackends(), func(b string) bool {
		os := config.SandboxBackendOS(b)
		return b == "auto" || os != "" && os != runtime.GOOS
	})
	slices.Sort(backends)
	if got := sandbox.Names(); !slices.Equal(got, backends) {
		t.Errorf("registered sandbox backends %v, config.SandboxBackends %v", got, backends)
	}
	for _, b := range sandbox.Names() {
		r, ok := sandbox.RemoteOf(b)
		if !ok {
			continue
		}
		if !slices.Contains(Names(), r.Host) {
			t.Errorf("backend %s names host %q, which is not registered", b, r.Host)
		}
		if SandboxHost(b) != r.Host {
			t.Errorf("SandboxHost(%s) = %s, want %s", b, SandboxHost(b), r.Host)
		}
	}
}

// TestRemoteBackendRunsOnItsHost: a backend whose sandboxes live elsewhere
// is planned by its own host, never by the gateway's sandbox host; For
// offers no local sandbox of it; and every local backend runs on the
// sandbox host.
func TestRemoteBackendRunsOnItsHost(t *testing.T) {
	n := 0
	for _, b := range sandbox.Names() {
		r, remote := sandbox.RemoteOf(b)
		if !remote {
			if SandboxHost(b) != "sandbox" {
				t.Errorf("local backend %s runs on %s", b, SandboxHost(b))
			}
			continue
		}
		n++
		if _, err := sandbox.For(context.Background(), config.SandboxSettings{Backend: b}); err == nil {
			t.Errorf("sandbox.For(%s) offered a local sandbox", b)
		}
		h, ok := NewRegistry(Deps{}).Lookup(r.Host)
		if !ok {
			t.Fatalf("host %s of backend %s missing", r.Host, b)
		}
		var pl Plan
		if err := h.Plan(context.Background(), Request{Sandbox: config.SandboxSettings{Backend: b, On: true}}, &pl); err == nil {
			t.Errorf("host %s planned a run without its backend's dependencies", r.Host)
		}
		if len(r.Layers(config.SandboxSettings{Backend: b})) == 0 || r.Describe(config.SandboxSettings{Backend: b}) == "" || r.NoLocal == "" {
			t.Errorf("backend %s: registration incomplete: %+v", b, r)
		}
	}
	if n == 0 {
		t.Fatal("no remote backend registered (the pod host registers kubernetes)")
	}
}
