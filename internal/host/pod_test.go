package host

import (
	"context"
	"errors"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/node/port"
)

// fakePods is the kubernetes backend as the pod host sees it: a pod that
// is ready at once (or an error), and patches it records. The real one
// (internal/host/kube) needs a cluster; e2e/kube runs it against an API server.
type fakePods struct {
	ref     NodeRef
	err     error
	patched []string
}

func (f *fakePods) Ensure(ctx context.Context, agent string, sb config.SandboxSettings, progress func(string)) (NodeRef, error) {
	progress("creating the sandbox pod")
	return f.ref, f.err
}

func (f *fakePods) Patch(ctx context.Context, agent string, sb config.SandboxSettings, input string) (port.Patch, *apitype.Error) {
	f.patched = append(f.patched, input)
	return port.Patch{NodeID: f.ref.ID}, nil
}

// fakeHub satisfies Nodes; the pod host's Plan never calls it.
type fakeHub struct{ port.Hub }

// TestPodHostPlans: the pod host plans a run on the agent's pod as a node
// run gated by the node's prepare step, shown as host sandbox with the
// backend's layers; it refuses without pods (not conch serve), with the
// cluster's error, or with the backend's keys unset; and it applies
// apply_patch through the pod only when it has pods.
func TestPodHostPlans(t *testing.T) {
	sb := config.SandboxSettings{On: true, Backend: podBackend, Scope: "agent"}
	sb.Kube.GatewayURL, sb.Kube.Image, sb.Kube.RuntimeClassName = "http://127.0.0.1:9", "conch:test", "gvisor"
	req := Request{Params: apitype.ExecParams{Command: "make"}, Sandbox: sb}

	pods := &fakePods{ref: NodeRef{ID: "n1", Caps: []string{"system.run"}}}
	h := &podHost{d: Deps{Pods: pods, Nodes: fakeHub{}}}
	pl := &Plan{Agent: "main", PTY: true, Stdin: "pty"}
	if err := h.Plan(context.Background(), req, pl); err != nil {
		t.Fatalf("plan: %v", err)
	}
	if pl.Host != "sandbox" || pl.Gate != GateNode || pl.Node == nil || pl.Node.Ref.ID != "n1" || pl.PTY || pl.Stdin != "open" {
		t.Fatalf("plan: host %q gate %v node %+v pty %v stdin %q", pl.Host, pl.Gate, pl.Node, pl.PTY, pl.Stdin)
	}
	if pl.SbInfo == nil || pl.SbInfo.Backend != podBackend || pl.SbInfo.Workspace != PodWorkspace || len(pl.SbInfo.Layers) != 2 || pl.SbInfo.Layers[1] != "runtimeClass=gvisor" {
		t.Fatalf("sandbox info %+v", pl.SbInfo)
	}
	if len(pl.Warnings) != 2 { // the progress line and the PTY fallback
		t.Fatalf("warnings %q", pl.Warnings)
	}

	for name, c := range map[string]struct {
		d  Deps
		sb config.SandboxSettings
	}{
		"no pods (conch mcp)": {Deps{Nodes: fakeHub{}}, sb},
		"the cluster refuses": {Deps{Pods: &fakePods{err: errors.New("forbidden")}, Nodes: fakeHub{}}, sb},
		"no image":            {Deps{Pods: pods, Nodes: fakeHub{}}, func() config.SandboxSettings { s := sb; s.Kube.Image = ""; return s }()},
	} {
		r := req
		r.Sandbox = c.sb
		if err := (&podHost{d: c.d}).Plan(context.Background(), r, &Plan{}); err == nil || err.Code != apitype.CodeSandboxUnavail {
			t.Errorf("%s: %v, want %s", name, err, apitype.CodeSandboxUnavail)
		}
	}

	if _, _, ok := (&podHost{}).Patch(context.Background(), "main", sb, "patch"); ok {
		t.Error("a pod host without pods took a patch")
	}
	if np, err, ok := h.Patch(context.Background(), "main", sb, "patch"); !ok || err != nil || np.NodeID != "n1" || len(pods.patched) != 1 {
		t.Errorf("patch through the pod: %+v %v %v %v", np, err, ok, pods.patched)
	}
}
