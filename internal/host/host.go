// Package host plans and starts a command on one kind of host: the
// gateway itself, a sandbox on the gateway, a paired node host, or a
// sandbox pod (the kubernetes backend's sandboxes, over a node link).
//
// The engine decides what a call may do (policy, approvals, quotas); a
// Host decides where and how it runs: its working directory, its
// environment, its argv, and the process that runs it. Each host is one
// file of this package that registers a Factory in its init function; the
// engine builds a Registry from the factories at construction and looks a
// host up by name for every exec call. This package never imports the
// engine.
package host

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/node/port"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// Host plans and starts runs of one kind.
type Host interface {
	// Name is the host's name in tools.exec.host and in results
	// ("gateway", "sandbox", "node"; "pod", which runs the sandboxes of
	// the kubernetes backend and shows as "sandbox").
	Name() string
	// Plan fills in the host's part of pl: working directory,
	// environment, argv and whatever Start needs. The engine has already
	// set the fields that do not depend on the host (window, timeout,
	// pty, stdin). It honours ctx: a cancelled call stops planning.
	Plan(ctx context.Context, req Request, pl *Plan) *apitype.Error
	// Start starts a planned run whose session record exists: spec is the
	// supervisor spec the engine built from pl. The handle's events
	// follow the run until its end.
	Start(ctx context.Context, pl *Plan, spec proto.Spec, run Run) (*proto.Handle, error)
}

// Gate says which policy gate a plan passes before Start. The zero value
// is the gateway's policy: a host that says nothing is gated.
type Gate int

const (
	// GatePolicy: the gateway's own policy and approvals.
	GatePolicy Gate = iota
	// GateNone: no gate (a sandbox, whose walls are the protection; an
	// ungated gateway run: elevated full, or sandboxing off).
	GateNone
	// GateNode: the node's policy, through its prepare step; approvals
	// are prompted on the gateway.
	GateNode
)

// Request is what a host needs besides the plan.
type Request struct {
	Params apitype.ExecParams
	// Workspace is the agent's default workspace (configured, the
	// caller's, the agents file's, else the engine's directory).
	Workspace string
	// Sandbox are the agent's sandbox settings and Backend the backend
	// chosen for them (nil unless host=sandbox).
	Sandbox config.SandboxSettings
	Backend sandbox.Backend
}

// Run is what Start needs to know of the call beyond the plan.
type Run struct {
	RequestID  string
	ApprovalID string
}

// Plan is a validated exec request, ready to spawn.
type Plan struct {
	Agent      string
	Command    string
	Argv       []string
	Env        []string
	EnvKeys    []string
	Cwd        string
	Host       string // the host results report (sandbox for a pod run)
	HostReason string
	// Runner is the registered host that planned the run and must start
	// it: Host, or the host of a sandbox backend whose sandboxes live
	// elsewhere (pod for kubernetes). Never start a plan on another.
	Runner    string
	Gate      Gate
	PTY       bool
	Stdin     string
	Window    time.Duration // <0: none (synchronous)
	LoginWait time.Duration // spent in the window waiting for the login PATH
	Timeout   time.Duration // 0: none
	Warnings  []string
	Set       config.ExecSettings
	EnvHash   string // of the request's env overrides
	Sandbox   *proto.SandboxSpec
	SbInfo    *apitype.SandboxInfo
	// Guard records the paths the sandbox protects, to be checked when
	// the run ends (nil: none).
	Guard *sandbox.Guard
	Node  *NodeTarget // host=node only
	// Local: start under a local supervisor whatever Host says (a node
	// host running a gateway's request: Host is "node" in its records).
	Local bool
	Trace trace.SpanContext // the exec call's span, for the run's
}

// Deps are what the engine gives its hosts at construction.
type Deps struct {
	// Home is the conch home.
	Home string
	// InitExe returns the program that runs `sandbox-init` in a sandbox
	// (conch-shim, or conch itself), asked at each plan; nil or "" means
	// this executable.
	InitExe func() string
	// Log receives diagnostics.
	Log *slog.Logger
	// LoginPATH returns the login-shell PATH of gateway runs, waiting for
	// it within window, the run's yield window (< 0: as long as it
	// takes).
	LoginPATH func(window time.Duration) (path string, known bool, waited time.Duration)
	// Launch starts a spec under a local supervisor (the engine's
	// supervisor.Pool: its spare or its shared supervisors), waiting for
	// its start no longer than ctx's deadline allows (the caller's yield
	// window; no deadline: the pool's own bound).
	Launch func(ctx context.Context, spec proto.Spec) (*proto.Handle, error)
	// Nodes runs host=node calls on node hosts; nil: no node available.
	Nodes Nodes
	// NodeBinding is the node an agent's calls are bound to, or "".
	NodeBinding func(agent string) string
	// Pods is the kubernetes sandbox backend (pod.go); nil: none.
	Pods PodSandboxes
}

// Patcher is a host that applies apply_patch itself rather than on the
// gateway's file system (the pod host: in the pod, through its node).
// ok is false when it declines, and the caller goes on as for any host.
type Patcher interface {
	Patch(ctx context.Context, agent string, sb config.SandboxSettings, input string) (np port.Patch, err *apitype.Error, ok bool)
}

// SandboxHost is the name of the host that runs the sandboxes of backend:
// the host a backend whose sandboxes live elsewhere registered
// (sandbox.RemoteOf), else "sandbox", the gateway's own sandboxes.
func SandboxHost(backend string) string {
	if r, ok := sandbox.RemoteOf(backend); ok {
		return r.Host
	}
	return "sandbox"
}

// Selectable returns the host names an agent's configuration and an
// exec call may name (tools.exec.host, exec's host): every registered
// host but those that run a remote backend's sandboxes, which the
// sandbox host's name selects. Sorted.
func Selectable() []string {
	var out []string
	for _, n := range Names() {
		remote := false
		for _, b := range sandbox.Names() {
			if r, ok := sandbox.RemoteOf(b); ok && r.Host == n {
				remote = true
			}
		}
		if !remote {
			out = append(out, n)
		}
	}
	return out
}

// Factory makes a host from the engine's dependencies.
type Factory func(Deps) Host

var (
	factoriesMu sync.Mutex
	factories   = map[string]Factory{}
)

// Register adds a host kind; each host file calls it from init. A second
// registration of a name panics.
func Register(name string, f Factory) {
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	if _, dup := factories[name]; dup {
		panic(fmt.Sprintf("host: %s registered twice", name))
	}
	factories[name] = f
}

// Names returns the registered host kinds, sorted.
func Names() []string {
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	var out []string
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Registry is the set of hosts of one engine.
type Registry struct {
	hosts map[string]Host
}

// NewRegistry makes every registered host with d; each of extra replaces
// the host of its name (or adds one).
func NewRegistry(d Deps, extra ...Host) *Registry {
	r := &Registry{hosts: map[string]Host{}}
	factoriesMu.Lock()
	for n, f := range factories {
		r.hosts[n] = f(d)
	}
	factoriesMu.Unlock()
	for _, h := range extra {
		r.hosts[h.Name()] = h
	}
	return r
}

// Lookup returns the host named name.
func (r *Registry) Lookup(name string) (Host, bool) {
	h, ok := r.hosts[name]
	return h, ok
}
