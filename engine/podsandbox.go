package engine

import (
	"context"
	"errors"
	"slices"
	"sort"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/hostenv"
	"github.com/conchsh/conch/policy"
)

// The kubernetes sandbox backend (docs/kubernetes.md): an agent's sandbox
// is a pod running `conch node`, paired with this gateway without an
// operator; its runs are planned like a node run on that pod's node link
// (journal, PTY, wait/search/screen, the node-side policy), shown as
// host=sandbox with backend kubernetes.

// PodSandboxes is the kubernetes backend as the engine uses it
// (internal/kube).
type PodSandboxes interface {
	// Ensure returns the node of the sandbox pod of agent's scope under
	// sb, creating the pod and waiting until it is paired and connected;
	// progress receives the lines to show while it waits. Failures are
	// sandbox_unavailable with the cluster's reason.
	Ensure(ctx context.Context, agent string, sb config.SandboxSettings, progress func(string)) (NodeRef, error)
}

// planPod plans a sandboxed run on agent's sandbox pod.
func (e *Engine) planPod(agent string, p apitype.ExecParams, pl *plan, sb config.SandboxSettings) *apitype.Error {
	if e.opt.Pods == nil || e.opt.Nodes == nil {
		return sandboxUnavailable(errors.New("sandbox.backend kubernetes needs conch serve: its pods dial back to the gateway, and this process is none"))
	}
	if m := sb.KubeMissing(); m != "" {
		return sandboxUnavailable(errors.New("sandbox.backend is kubernetes, but " + m + " is not set"))
	}
	ref, err := e.opt.Pods.Ensure(context.Background(), agent, sb, func(line string) {
		e.log.Info(line, "agent", agent)
		e.emit("sandbox.progress", agent, map[string]string{"agent": agent, "line": line})
		pl.warnings = append(pl.warnings, line)
	})
	if err != nil {
		e.log.Warn("sandbox unavailable", "agent", agent, "backend", "kubernetes", "err", err)
		return sandboxUnavailable(err)
	}
	if pl.pty && !slices.Contains(ref.Caps, "pty") {
		pl.warnings = append(pl.warnings, "Warning: this sandbox pod does not support PTY; running without it.")
		pl.pty = false
	}
	if !pl.pty && pl.stdin == "pty" {
		pl.stdin = "open"
	}
	if msg := hostenv.Validate(p.Env); msg != "" {
		return apitype.Errorf(apitype.CodeSecurity, "%s", msg)
	}
	pl.node = &nodeTarget{ref: ref, query: ref.ID, workdir: p.Workdir, params: p.Env}
	pl.cwd = p.Workdir
	for k := range p.Env {
		pl.envKeys = append(pl.envKeys, k)
	}
	sort.Strings(pl.envKeys)
	pl.envHash = envHash(p.Env)
	pl.argv = []string{"/bin/sh", "-lc", p.Command}
	layers := []string{"pod"}
	if sb.Kube.RuntimeClassName != "" {
		layers = append(layers, "runtimeClass="+sb.Kube.RuntimeClassName)
	}
	pl.sbInfo = &apitype.SandboxInfo{Backend: "kubernetes", Scope: sb.Scope, Layers: layers, Workspace: podWorkspace, Cwd: p.Workdir}
	return nil
}

// podWorkspace is the working directory of a sandbox pod's container.
const podWorkspace = "/workspace"

// podGate is what a sandbox pod's run sends with system.run.prepare: like
// every sandboxed run it passes no policy gate on the gateway (the pod is
// the boundary); the node in the pod still judges it under its own
// configuration.
func podGate(eff *Policy) {
	eff.Security, eff.Ask = policy.SecurityFull, policy.AskOff
}
