package host

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/host/shellenv"
	"github.com/conchsh/conch/internal/node/port"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// The pod host runs the sandboxes of the kubernetes backend
// (docs/kubernetes.md): an agent's sandbox is a pod running `conch node`,
// paired with the gateway without an operator; its runs go over that
// pod's node link like a node run (journal, PTY, wait/search/screen, the
// node-side policy) and show as host=sandbox with backend kubernetes.
// internal/host/kube makes the pods (PodSandboxes); this file is the only one
// outside it and internal/config that names the backend.

// podBackend is the sandbox backend whose sandboxes the pod host runs.
const podBackend = "kubernetes"

func init() {
	Register("pod", func(d Deps) Host { return &podHost{d: d} })
	sandbox.RegisterRemote(podBackend, sandbox.Remote{
		Host:   "pod",
		Layers: podLayers,
		Describe: func(sb config.SandboxSettings) string {
			return "sandbox backend " + podBackend + ": pods in the cluster of " + cmp.Or(sb.Kube.Kubeconfig, "the in-cluster configuration") + " (conch sandbox list shows them)"
		},
		NoLocal: "sandbox backend " + podBackend + " runs exec and process in the agent's pod through conch serve (docs/kubernetes.md); it offers no local sandbox (apply_patch, conch mcp)",
	})
}

// podHost plans and starts the runs of agents whose sandbox is a pod.
type podHost struct{ d Deps }

var _ Patcher = (*podHost)(nil)

func (h *podHost) Name() string { return "pod" }

// podLayers are the layers a pod run reports.
func podLayers(sb config.SandboxSettings) []string {
	layers := []string{"pod"}
	if sb.Kube.RuntimeClassName != "" {
		layers = append(layers, "runtimeClass="+sb.Kube.RuntimeClassName)
	}
	return layers
}

// PodSandboxes is the kubernetes backend as the sandbox host uses it.
type PodSandboxes interface {
	// Ensure returns the node of the sandbox pod of agent's scope under
	// sb, creating the pod and waiting until it is paired and connected;
	// progress receives the lines to show while it waits. An error says
	// why in the cluster's words.
	Ensure(ctx context.Context, agent string, sb config.SandboxSettings, progress func(string)) (NodeRef, error)
	// Patch applies an apply_patch input in the pod's /workspace through
	// its node (system.patch.apply), creating the pod as Ensure does.
	Patch(ctx context.Context, agent string, sb config.SandboxSettings, input string) (port.Patch, *apitype.Error)
}

// PodWorkspace is the working directory of a sandbox pod's container.
const PodWorkspace = "/workspace"

// Plan plans a sandboxed run on the agent's sandbox pod. Like every
// sandboxed run it passes no policy gate on the gateway (the pod is the
// boundary); the prepare step of the node link still runs (GateNode with
// the sandbox's settings, see the engine's node gate), and the node in the
// pod judges it under its own configuration.
func (h *podHost) Plan(ctx context.Context, req Request, pl *Plan) *apitype.Error {
	p, sb := req.Params, req.Sandbox
	if h.d.Pods == nil || h.d.Nodes == nil {
		return SandboxUnavailable(errors.New("sandbox.backend " + podBackend + " needs conch serve: its pods dial back to the gateway, and this process is none"))
	}
	if m := sb.KubeMissing(); m != "" {
		return SandboxUnavailable(errors.New("sandbox.backend is " + podBackend + ", but " + m + " is not set"))
	}
	ref, err := h.d.Pods.Ensure(ctx, pl.Agent, sb, func(line string) {
		if h.d.Log != nil {
			h.d.Log.Info(line, "agent", pl.Agent)
		}
		pl.Warnings = append(pl.Warnings, line)
	})
	if err != nil {
		if h.d.Log != nil {
			h.d.Log.Warn("sandbox unavailable", "agent", pl.Agent, "backend", podBackend, "err", err)
		}
		return SandboxUnavailable(err)
	}
	if pl.PTY && !slices.Contains(ref.Caps, "pty") {
		pl.Warnings = append(pl.Warnings, "Warning: this sandbox pod does not support PTY; running without it.")
		pl.PTY = false
	}
	if !pl.PTY && pl.Stdin == "pty" {
		pl.Stdin = "open"
	}
	if msg := shellenv.Validate(p.Env); msg != "" {
		return apitype.Errorf(apitype.CodeSecurity, "%s", msg)
	}
	pl.Host = "sandbox"
	pl.Gate = GateNode
	pl.Node = &NodeTarget{Ref: ref, Query: ref.ID, Workdir: p.Workdir, Params: p.Env}
	pl.Cwd = p.Workdir
	pl.EnvKeys = SortedKeys(p.Env)
	pl.EnvHash = EnvHash(p.Env)
	pl.Argv = []string{"/bin/sh", "-lc", p.Command}
	pl.SbInfo = &apitype.SandboxInfo{Backend: podBackend, Scope: sb.Scope, Layers: podLayers(sb), Workspace: PodWorkspace, Cwd: p.Workdir}
	return nil
}

// Start starts a planned pod run through the hub, as a node run.
func (h *podHost) Start(ctx context.Context, pl *Plan, spec proto.Spec, r Run) (*proto.Handle, error) {
	return (&nodeHost{d: h.d}).Start(ctx, pl, spec, r)
}

// Patch applies apply_patch in the pod's /workspace through its node; it
// declines (ok false) when this process has no pods (not conch serve).
func (h *podHost) Patch(ctx context.Context, agent string, sb config.SandboxSettings, input string) (np port.Patch, err *apitype.Error, ok bool) {
	if h.d.Pods == nil {
		return port.Patch{}, nil, false
	}
	np, err = h.d.Pods.Patch(ctx, agent, sb, input)
	return np, err, true
}
