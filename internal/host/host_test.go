package host

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/host/shellenv"
)

// oldChoose is the host switch as the engine had it before the host
// layer, kept as the reference Choose must equal on every input.
func oldChoose(configured, requested, level string, sbOn bool, sbErr error) (string, string, string) {
	switch {
	case level == "ask":
		return "gateway", "", ""
	case level == "full":
		return "gateway", "elevated-full", ""
	case configured == "node" && requested != "" && requested != "node",
		configured != "node" && requested == "node":
		return "", "", apitype.CodeHostNotAllowed
	case configured == "node":
		return "node", "", ""
	case configured == "gateway" && requested != "" && requested != "gateway":
		return "", "", apitype.CodeHostNotAllowed
	case configured == "gateway":
		return "gateway", "", ""
	case sbOn && sbErr != nil:
		return "", "", apitype.CodeSandboxUnavail
	case sbOn:
		if requested != "" && requested != "sandbox" {
			return "", "", apitype.CodeHostNotAllowed
		}
		return "sandbox", "", ""
	case configured == "sandbox" || requested == "sandbox":
		return "", "", apitype.CodeSandboxUnavail
	default:
		return "gateway", "implicit-sandbox-off", ""
	}
}

func TestChooseMatchesEveryCase(t *testing.T) {
	hosts := []string{"", "gateway", "sandbox", "node"} // the values config and exec accept
	n := 0
	for _, conf := range hosts {
		for _, req := range hosts {
			for _, level := range []string{"", "ask", "full"} {
				for _, on := range []bool{false, true} {
					for _, sbErr := range []error{nil, errors.New("no backend")} {
						n++
						name, reason, err := Choose(Choice{Configured: conf, Requested: req, Elevated: level, SandboxOn: on, SandboxErr: sbErr})
						code := ""
						if err != nil {
							code = err.Code
						}
						wn, wr, wc := oldChoose(conf, req, level, on, sbErr)
						if name != wn || reason != wr || code != wc {
							t.Errorf("conf=%q req=%q level=%q on=%v err=%v: got %q %q %q, want %q %q %q", conf, req, level, on, sbErr, name, reason, code, wn, wr, wc)
						}
					}
				}
			}
		}
	}
	if n != 192 {
		t.Fatalf("%d cases", n)
	}
}

// A host registered beside the three is chosen like a node: only when the
// agent is configured for it, and then only it.
func TestChooseNewHost(t *testing.T) {
	for _, c := range []struct {
		conf, req, level string
		want, code       string
	}{
		{"k8s", "", "", "k8s", ""},
		{"k8s", "k8s", "", "k8s", ""},
		{"k8s", "gateway", "", "", apitype.CodeHostNotAllowed},
		{"k8s", "node", "", "", apitype.CodeHostNotAllowed},
		{"", "k8s", "", "", apitype.CodeHostNotAllowed},
		{"gateway", "k8s", "", "", apitype.CodeHostNotAllowed},
		{"k8s", "", "full", "gateway", ""},
	} {
		for _, on := range []bool{false, true} {
			name, _, err := Choose(Choice{Configured: c.conf, Requested: c.req, Elevated: c.level, SandboxOn: on})
			code := ""
			if err != nil {
				code = err.Code
			}
			if name != c.want || code != c.code {
				t.Errorf("%+v sandbox=%v: got %q %q", c, on, name, code)
			}
		}
	}
}

func envMap(list []string) map[string]string {
	m := map[string]string{}
	for _, kv := range list {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			panic("duplicate " + k)
		}
		m[k] = v
	}
	return m
}

// The builder applies its layers in order, merges the login PATH before
// the configured prepends, always sets the markers, and TERM only for a
// PTY; its output is sorted and has each key once.
func TestEnvBuild(t *testing.T) {
	t.Setenv("TERM", "screen")
	spec := EnvSpec{
		Base:        map[string]string{"PATH": "/usr/bin:/bin", "A": "base", "CONCH_SHELL": "x"},
		Layers:      []map[string]string{{"A": "layer1", "B": "1"}, {"B": "2"}},
		LoginPATH:   "/opt/login:/usr/bin",
		PathPrepend: []string{"/first", " /first ", ""},
	}
	got := spec.Build()
	if !slices.IsSorted(got) {
		t.Fatalf("not sorted: %v", got)
	}
	m := envMap(got)
	if m["A"] != "layer1" || m["B"] != "2" || m["CONCH_SHELL"] != "exec" || m["OPENCLAW_SHELL"] != "exec" {
		t.Fatalf("%v", m)
	}
	if !strings.HasPrefix(m["PATH"], "/first:/opt/login:") || strings.Count(m["PATH"], "/usr/bin") != 1 {
		t.Fatalf("PATH %q", m["PATH"])
	}
	if _, ok := m["TERM"]; ok {
		t.Fatal("TERM without a PTY")
	}
	spec.PTY = true
	if m := envMap(spec.Build()); m["TERM"] != "screen" {
		t.Fatalf("TERM %q, want the daemon's", m["TERM"])
	}
	spec.Term = "xterm-256color"
	if m := envMap(spec.Build()); m["TERM"] != "xterm-256color" {
		t.Fatalf("TERM %q, want the fixed one", m["TERM"])
	}
	os.Unsetenv("TERM")
	spec.Term = ""
	if m := envMap(spec.Build()); m["TERM"] != "xterm-256color" {
		t.Fatalf("TERM %q, want the default", m["TERM"])
	}
}

// A node run's environment: the inherited one, the defaults, the
// request's overrides, the markers, and for a PTY TERM=xterm-256color
// whatever the node's own TERM is (each key once).
func TestNodeEnv(t *testing.T) {
	t.Setenv("TERM", "screen")
	m := envMap(NodeEnv(map[string]string{"PAGER": "cat"}, map[string]string{"PAGER": "less", "X": "1"}, true))
	if m["PAGER"] != "less" || m["X"] != "1" || m["TERM"] != "xterm-256color" || m["CONCH_SHELL"] != "exec" {
		t.Fatalf("%v", m)
	}
	if m := envMap(NodeEnv(nil, nil, false)); m["TERM"] != "screen" {
		t.Fatalf("without a PTY the node's TERM is inherited as is: %q", m["TERM"])
	}
}

// Every registered host is built by NewRegistry, and a host given to it
// replaces the registered one of its name.
func TestRegistry(t *testing.T) {
	for _, want := range []string{"gateway", "sandbox", "node"} {
		if !slices.Contains(Names(), want) {
			t.Fatalf("%s not registered: %v", want, Names())
		}
	}
	r := NewRegistry(Deps{})
	for _, n := range Names() {
		if h, ok := r.Lookup(n); !ok || h.Name() != n {
			t.Fatalf("lookup %s: %v %v", n, h, ok)
		}
	}
	g := &gateway{}
	r = NewRegistry(Deps{}, g)
	if h, _ := r.Lookup("gateway"); h != Host(g) {
		t.Fatal("the given host did not replace the registered one")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second registration of a name did not panic")
		}
	}()
	Register("gateway", func(Deps) Host { return g })
}

// TestDaemonPathFloor: an engine started with a bare PATH (a service
// manager's PATH=/usr/bin:/bin) gives its host commands the OS's minimal
// PATH, on gateway and node runs alike; its own entries keep their
// order, and one started with none gets the floor whole.
func TestDaemonPathFloor(t *testing.T) {
	floor := shellenv.PathFloor(runtime.GOOS)
	if len(floor) == 0 {
		t.Skipf("no PATH floor on %s", runtime.GOOS)
	}
	t.Setenv("PATH", "/usr/bin:/bin")
	for name, env := range map[string]map[string]string{
		"gateway base": InheritedBase(),
		"node run":     envMap(NodeEnv(nil, nil, false)),
	} {
		if got, want := env["PATH"], shellenv.WithFloor(runtime.GOOS, "/usr/bin:/bin"); got != want || !strings.HasPrefix(got, "/usr/bin:/bin:") {
			t.Errorf("%s: PATH %q, want %q", name, got, want)
		}
		for _, f := range floor {
			if !slices.Contains(strings.Split(env["PATH"], ":"), f) {
				t.Errorf("%s: PATH %q lacks %s", name, env["PATH"], f)
			}
		}
	}
	os.Unsetenv("PATH")
	if got := InheritedBase()["PATH"]; got != strings.Join(floor, ":") {
		t.Errorf("without a PATH: %q, want the floor", got)
	}
}
