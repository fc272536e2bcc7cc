package sandbox

import (
	"sort"

	"github.com/conchsh/conch/internal/config"
)

// Remote describes a backend whose sandboxes live off the gateway (the
// kubernetes backend's pods): no Backend runs them here, a host of
// internal/host plans and starts their runs, and the host file registers
// the backend with RegisterRemote from its init function.
type Remote struct {
	// Host is the name of the host (internal/host) that runs the
	// backend's sandboxes.
	Host string
	// Layers are the layers its runs report for settings s.
	Layers func(s config.SandboxSettings) []string
	// Describe is `conch doctor`'s line about an agent's sandbox under s.
	Describe func(s config.SandboxSettings) string
	// NoLocal is why For offers no local sandbox of this backend (what
	// apply_patch's local path and conch mcp would need).
	NoLocal string
}

// remotes are the backends registered with RegisterRemote; guarded by bmu.
var remotes = map[string]Remote{}

// RegisterRemote makes a backend whose sandboxes live elsewhere known by
// name. A name registered twice, or as both kinds, panics.
func RegisterRemote(name string, r Remote) {
	bmu.Lock()
	defer bmu.Unlock()
	if _, dup := remotes[name]; dup {
		panic("sandbox: backend " + name + " registered twice")
	}
	if _, dup := factories[name]; dup {
		panic("sandbox: backend " + name + " registered twice")
	}
	remotes[name] = r
}

// RemoteOf returns the registration of the backend named name when its
// sandboxes live elsewhere.
func RemoteOf(name string) (Remote, bool) {
	bmu.Lock()
	defer bmu.Unlock()
	r, ok := remotes[name]
	return r, ok
}

// Names returns the names of every registered backend, local and
// remote, sorted.
func Names() []string {
	bmu.Lock()
	defer bmu.Unlock()
	var out []string
	for n := range factories {
		out = append(out, n)
	}
	for n := range remotes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
