// Package sandbox builds the isolated environments behind exec
// host=sandbox (docs/sandbox.md). This package holds what every backend
// shares: the Backend interface and the registry behind For, the
// workspace and bind checks, the host/sandbox path view, git protection,
// the seccomp program and the probes run in a sandbox's namespaces. The
// backends are its subpackages: bwrap (namespaces and mounts, no
// daemon), landlock (Landlock + seccomp applied by a re-exec'd `conch
// sandbox-init`) and docker; initproc is `conch sandbox-init` itself. A backend only
// builds the argv the session supervisor runs; the supervisor keeps doing
// what it does for every session (PTY, journal, cgroup containment,
// timeouts, kill), so every exec and process feature works the same
// inside a sandbox.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/conchsh/conch/internal/config"
)

// InsideHome is the scope home as seen inside bwrap and docker sandboxes.
const InsideHome = "/home/conch"

// InsideExe is where the conch binary is mounted inside bwrap and docker
// sandboxes.
const InsideExe = "/run/conch/conch"

// DefaultPath is the PATH inside a sandbox when the gateway has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Run is one sandboxed run, fully resolved.
type Run struct {
	Home      string // conch home (host path)
	Exe       string // the conch executable (host path)
	Settings  config.SandboxSettings
	Workspace string // the workspace on the host (the real one, or the private one for access none)
	// HostWorkspace is the agent's own workspace on the host: Workspace,
	// or for access none the one the private workspace replaces (which a
	// backend that shows the host's file system hides).
	HostWorkspace string
	Cwd           string // the working directory, host path inside Workspace
	Command       string // shell command text (PATH prefix included)
	Env           []string
	PTY           bool
	// Files, set by Command, are opened by the supervisor and passed to
	// the command from fd 4 on (bwrap: the --seccomp program).
	Files []string
	// BlockFD, set by Command: the argv waits on fd 3 until the
	// supervisor has placed the whole tree (bwrap's and sandbox-init's
	// --block-fd).
	BlockFD bool
	// Protected, set by Command, are the workspace-relative paths the
	// backend mounts read-only (git protection, protectPaths): a Guard
	// records them before the run and checks them after it.
	Protected []string
	// ProtectedReadOnly, set by Command: the kernel keeps Protected
	// read-only for the whole run (bwrap's read-only mounts, Seatbelt's
	// deny rules). False (landlock, which cannot make the git directory
	// read-only) makes the Guard also record the repository state a run
	// could change there (NewGuardFor).
	ProtectedReadOnly bool
	// CttyInside, set by Command: the init inside the sandbox makes a
	// session of its own and claims the run's PTY as its controlling
	// terminal (bwrap with a PTY), so the supervisor must not.
	CttyInside bool
}

// Backend is one way of isolating a run.
type Backend interface {
	// Name is bwrap, landlock, docker or seatbelt.
	Name() string
	// Available reports why the backend cannot be used, or nil.
	Available(ctx context.Context) error
	// Prepare makes the scope's directories (docker: the container).
	Prepare(ctx context.Context, r *Run) error
	// Command returns the argv and environment the supervisor runs.
	Command(r *Run) (argv, env []string, err error)
	// Layers names the isolation layers in force (bwrap: namespaces,
	// mounts; landlock: landlock-abi-N, seccomp, …).
	Layers(r *Run) []string
	// Remove deletes per-scope state (docker: the container).
	Remove(ctx context.Context, scope string) error
}

// ScopeDir is $CONCH_HOME/sandboxes/<scope>.
func ScopeDir(home, scope string) string { return filepath.Join(home, "sandboxes", scope) }

// View maps paths between the host and the sandbox for one backend and
// settings (sandbox.workspacePath; docker always mounts at /workspace).
type View struct {
	Host   string // the workspace on the host
	Inside string // where it is mounted inside
}

// NewView returns the mapping for settings and backend name.
func NewView(workspace string, s config.SandboxSettings, backend string) View {
	v := View{Host: workspace, Inside: workspace}
	if backend == "docker" || backend == "bwrap" && s.WorkspacePath == "/workspace" {
		v.Inside = "/workspace"
	}
	return v
}

// MapIn maps a host path to the sandbox's view; ok is false outside the
// workspace.
func (v View) MapIn(host string) (string, bool) {
	rel, ok := Within(v.Host, host)
	if !ok {
		return "", false
	}
	return filepath.Join(v.Inside, rel), true
}

// MapOut maps a sandbox path back to the host; ok is false outside the
// workspace.
func (v View) MapOut(inside string) (string, bool) {
	rel, ok := Within(v.Inside, inside)
	if !ok {
		return "", false
	}
	return filepath.Join(v.Host, rel), true
}

// Within returns p relative to root; ok is false when p is not root or
// below it (lexically: no links are resolved).
func Within(root, p string) (string, bool) {
	rel, err := filepath.Rel(filepath.Clean(root), filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// Workspace resolves the workspace a run mounts: the real one, checked
// against the unsafe cases (/, $HOME, an ancestor of $HOME or
// $CONCH_HOME), or the private per-scope one
// for workspaceAccess=none.
func Workspace(home, workspace string, s config.SandboxSettings) (string, error) {
	if s.WorkspaceAccess == "none" {
		d := filepath.Join(ScopeDir(home, s.Scope), "workspace")
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", err
		}
		return d, nil
	}
	if err := WorkspaceSafe(home, workspace); err != nil {
		return "", err
	}
	return workspace, nil
}

// WorkspaceSafe refuses a workspace that is /, $HOME or an ancestor of
// $HOME or the conch home.
func WorkspaceSafe(home, workspace string) error {
	ws := realpath(workspace)
	if ws == "/" {
		return errors.New("the workspace is /")
	}
	uh, _ := os.UserHomeDir()
	for _, p := range []string{uh, home} {
		if p == "" {
			continue
		}
		if _, ok := Within(ws, realpath(p)); ok {
			return fmt.Errorf("the workspace %s is or contains %s", workspace, p)
		}
	}
	// Inside the conch home only the per-scope directories may be shown.
	if _, ok := Within(realpath(home), ws); ok {
		if _, ok := Within(filepath.Join(realpath(home), "sandboxes"), ws); !ok {
			return fmt.Errorf("the workspace %s lies inside the conch home %s", workspace, home)
		}
	}
	return nil
}

// CheckBind refuses configured bind sources that would open the boundary.
func CheckBind(home, src string) error {
	s := realpath(src)
	uh, _ := os.UserHomeDir()
	refused := []string{"/", "/etc", "/proc", "/sys", "/dev", "/run", "/var/run/docker.sock", "/run/docker.sock"}
	if slices.Contains(refused, s) || s == realpath(uh) || s == realpath(home) {
		return fmt.Errorf("bind source %s is refused", src)
	}
	for _, p := range []string{uh, home} {
		if _, ok := Within(s, realpath(p)); ok && p != "" {
			return fmt.Errorf("bind source %s contains %s", src, p)
		}
	}
	return nil
}

func realpath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// Probe caches an availability probe; failures are re-probed at most
// every 60 s.
type Probe struct {
	mu   sync.Mutex
	done bool
	err  error
	at   time.Time
}

// Get returns the cached result, or runs f and caches it.
func (p *Probe) Get(ctx context.Context, f func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done && (p.err == nil || time.Since(p.at) < 60*time.Second) {
		return p.err
	}
	err := f()
	if err != nil && ctx.Err() != nil {
		// The caller gave up, which says nothing of the backend: not
		// remembered for the next caller.
		return err
	}
	p.err, p.done, p.at = err, true, time.Now()
	return p.err
}

// Factory makes a backend for settings. Key names what of the settings
// an instance depends on ("" for none): For keeps one instance (and so
// one availability probe) per name and key.
type Factory struct {
	New func(s config.SandboxSettings) Backend
	Key func(s config.SandboxSettings) string
}

var (
	bmu       sync.Mutex
	factories = map[string]Factory{}
	backends  = map[string]Backend{}
)

// Register makes a backend known by name; each backend package calls it
// from its init function (internal/host/sandbox/backends imports them all).
func Register(name string, f Factory) {
	bmu.Lock()
	defer bmu.Unlock()
	if _, dup := factories[name]; dup {
		panic("sandbox: backend " + name + " registered twice")
	}
	if _, dup := remotes[name]; dup {
		panic("sandbox: backend " + name + " registered twice")
	}
	factories[name] = f
}

// New returns a fresh backend of name for settings (its probes not yet
// run), or nil when no backend of that name is registered.
func New(name string, s config.SandboxSettings) Backend {
	bmu.Lock()
	f, ok := factories[name]
	bmu.Unlock()
	if !ok {
		return nil
	}
	return f.New(s)
}

// Containers is a backend whose sandboxes outlive a run (docker): `conch
// sandbox status`, `recreate` and `prune` manage them.
type Containers interface {
	Backend
	// List returns the conch containers.
	List(ctx context.Context) ([]Container, error)
	// ContainerName is the name of scope's container.
	ContainerName(scope string) string
	// Prune removes containers idle longer than idle or older than
	// maxAge and returns their names.
	Prune(ctx context.Context, idle, maxAge time.Duration) ([]string, error)
}

// Gapped is a backend that cannot give all of what bwrap gives: Gaps
// says what is missing, in words for `conch doctor` and `conch sandbox
// status`.
type Gapped interface {
	Gaps(r *Run) []string
}

// autoOrders is the order in which backend auto tries them, per OS.
var autoOrders = map[string][]string{
	"linux":  {"bwrap", "docker", "landlock"},
	"darwin": {"seatbelt", "docker"},
}

// AutoOrder is the order in which backend auto tries the backends on goos
// (a GOOS value): on Linux bwrap, docker, landlock; on macOS Seatbelt,
// then docker.
func AutoOrder(goos string) []string { return autoOrders[goos] }

var autoOrder = AutoOrder(runtime.GOOS)

// For returns the backend for settings: the configured one, or for auto
// the first available of AutoOrder. The error explains why
// none is usable.
func For(ctx context.Context, s config.SandboxSettings) (Backend, error) {
	get := func(name string) Backend {
		bmu.Lock()
		defer bmu.Unlock()
		f, ok := factories[name]
		if !ok {
			return nil
		}
		key := name
		if f.Key != nil {
			key += ":" + f.Key(s)
		}
		if b, ok := backends[key]; ok {
			return b
		}
		b := f.New(s)
		backends[key] = b
		return b
	}
	if r, ok := RemoteOf(s.Backend); ok {
		return nil, errors.New(r.NoLocal)
	}
	if s.Backend != "auto" {
		b := get(s.Backend)
		if goos := config.SandboxBackendOS(s.Backend); b == nil && goos != "" && goos != runtime.GOOS {
			return nil, fmt.Errorf("sandbox backend %s exists only on %s", s.Backend, goos)
		}
		if b == nil {
			// A name config accepts that no file of this build
			// registered: a backend of another system (bwrap and
			// landlock need Linux; none is built for Windows).
			return nil, fmt.Errorf("sandbox backend %q is not built into this program (%s/%s)", s.Backend, runtime.GOOS, runtime.GOARCH)
		}
		if err := b.Available(ctx); err != nil {
			return nil, fmt.Errorf("sandbox backend %s: %w", s.Backend, err)
		}
		return b, nil
	}
	var why []string
	for _, n := range autoOrder {
		b := get(n)
		if b == nil {
			why = append(why, n+": not built into this program")
			continue
		}
		err := b.Available(ctx)
		if err == nil {
			return b, nil
		}
		why = append(why, n+": "+err.Error())
	}
	return nil, errors.New("no sandbox backend is usable (" + strings.Join(why, "; ") + ")")
}
