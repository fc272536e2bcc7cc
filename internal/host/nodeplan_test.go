package host

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// recHub is the gateway's node hub as the node host sees it: it selects
// from a fixed list of nodes and records what Start is asked to send.
// The real hub needs a paired node on a live link; e2e/nodes runs the
// node host against it, and internal/node/agent's tests run the node side.
type recHub struct {
	nodes  []NodeRef
	starts []apitype.NodeRunParams
	specs  []proto.Spec
}

func (h *recHub) Select(query string) (NodeRef, *apitype.Error) {
	for _, n := range h.nodes {
		if query == "" || SameNodeRef(query, n.Name) || query == n.ID {
			return n, nil
		}
	}
	return NodeRef{}, apitype.Errorf(apitype.CodeNodeUnknown, "unknown node %q", query)
}

func (h *recHub) Prepare(context.Context, string, apitype.NodePrepareParams) (apitype.NodePrepareReply, *apitype.Error) {
	return apitype.NodePrepareReply{}, nil
}

func (h *recHub) Start(nodeID string, spec proto.Spec, run apitype.NodeRunParams) (*proto.Handle, error) {
	h.starts, h.specs = append(h.starts, run), append(h.specs, spec)
	return nil, nil
}

func (h *recHub) Removed(string) {}

// TestNodePlan: a node run is gated by the node (GateNode), runs the
// command under the node's login shell, keeps the workdir as passed (the
// node resolves it) and builds no environment here (the node does, from
// its own and the overrides, which are hashed for the plan binding); it
// refuses without a hub, outside its binding, with a PATH or another
// refused override, and drops a PTY the node lacks.
func TestNodePlan(t *testing.T) {
	hub := &recHub{nodes: []NodeRef{{ID: "aaaaaaaaaaaaaaaaaaaaaaaa", Name: "build-box", Caps: []string{"system.run"}}}}
	binding := ""
	h := &nodeHost{d: Deps{Nodes: hub, NodeBinding: func(string) string { return binding }}}
	env := map[string]string{"FOO": "1", "BAR": "2"}
	req := Request{Params: apitype.ExecParams{Command: "make -j2", Workdir: "~/src", Env: env, Node: "build-box"}}
	pl := &Plan{Agent: "main", Command: "make -j2", PTY: true, Stdin: "pty", Set: config.ExecSettings{PathPrepend: []string{"/opt/bin"}}}
	if err := h.Plan(context.Background(), req, pl); err != nil {
		t.Fatal(err)
	}
	if pl.Host != "node" || pl.Gate != GateNode || pl.Cwd != "~/src" || !slices.Equal(pl.Argv, []string{"/bin/sh", "-lc", "make -j2"}) || pl.Env != nil {
		t.Fatalf("plan: host %q gate %v cwd %q argv %q env %q", pl.Host, pl.Gate, pl.Cwd, pl.Argv, pl.Env)
	}
	if pl.EnvHash != EnvHash(env) || !slices.Equal(pl.EnvKeys, []string{"BAR", "FOO"}) || pl.Node.Params["FOO"] != "1" {
		t.Fatalf("env binding: hash %s keys %q params %v", pl.EnvHash, pl.EnvKeys, pl.Node.Params)
	}
	if pl.PTY || pl.Stdin != "open" || len(pl.Warnings) != 2 {
		t.Fatalf("a node without pty: pty %v stdin %q warnings %q", pl.PTY, pl.Stdin, pl.Warnings)
	}

	// Start sends the plan as it is: the prepared plan id, the overrides
	// only, approval and its decision from the approval.
	pl.Node.Prep.PlanID, pl.Node.Decision, pl.Timeout = "plan-1", "allow-once", 90*time.Second
	spec := proto.Spec{ID: "sess-1", Cols: 80, Rows: 24}
	for _, approval := range []string{"", "appr-1"} {
		if _, err := h.Start(context.Background(), pl, spec, Run{RequestID: "req-1", ApprovalID: approval}); err != nil {
			t.Fatal(err)
		}
	}
	for i, run := range hub.starts {
		if run.PlanID != "plan-1" || run.SessionID != "sess-1" || run.TimeoutMs != 90000 || !run.Stream || run.Env["FOO"] != "1" || len(run.Env) != 2 ||
			run.Cwd != "~/src" || run.RawCommand != "make -j2" || hub.specs[i].Host != "node" {
			t.Fatalf("run %d: %+v", i, run)
		}
	}
	if a, b := hub.starts[0], hub.starts[1]; a.Approved || a.RunID != "req-1" || a.ApprovalDecision != "" || !b.Approved || b.RunID != "appr-1" || b.ApprovalDecision != "allow-once" {
		t.Fatalf("approval: unapproved %+v, approved %+v", a, b)
	}

	for _, c := range []struct {
		name    string
		d       Deps
		binding string
		req     apitype.ExecParams
		code    string
	}{
		{"no hub", Deps{}, "", apitype.ExecParams{Command: "true"}, apitype.CodeNodeUnavailable},
		{"outside the binding", Deps{Nodes: hub}, "build-box", apitype.ExecParams{Command: "true", Node: "other"}, apitype.CodeNodeNotAllowed},
		{"unknown node", Deps{Nodes: hub}, "", apitype.ExecParams{Command: "true", Node: "other"}, apitype.CodeNodeUnknown},
		{"PATH", Deps{Nodes: hub}, "", apitype.ExecParams{Command: "true", Env: map[string]string{"PATH": "/tmp"}}, apitype.CodeSecurity},
		{"LD_PRELOAD", Deps{Nodes: hub}, "", apitype.ExecParams{Command: "true", Env: map[string]string{"LD_PRELOAD": "x"}}, apitype.CodeSecurity},
	} {
		binding = c.binding
		d := c.d
		d.NodeBinding = func(string) string { return binding }
		err := (&nodeHost{d: d}).Plan(context.Background(), Request{Params: c.req}, &Plan{Agent: "main"})
		if err == nil || err.Code != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	// The binding in another spelling is the binding.
	binding = "BUILD-BOX"
	pl = &Plan{Agent: "main"}
	if err := h.Plan(context.Background(), Request{Params: apitype.ExecParams{Command: "true", Node: "build-box"}}, pl); err != nil || pl.Node.Query != "BUILD-BOX" {
		t.Fatalf("the binding respelled: %v %+v", err, pl.Node)
	}
}

// TestGatewayAndSandboxStartLaunchLocally: the gateway and sandbox hosts
// start the spec the engine built under the engine's local supervisor
// (Deps.Launch), unchanged; the supervisor itself is tested in its
// package and end to end.
func TestGatewayAndSandboxStartLaunchLocally(t *testing.T) {
	var got []proto.Spec
	d := Deps{Launch: func(_ context.Context, s proto.Spec) (*proto.Handle, error) {
		got = append(got, s)
		return nil, nil
	}}
	for _, h := range []Host{&gateway{d: d}, &sandboxHost{d: d}} {
		if _, err := h.Start(context.Background(), &Plan{}, proto.Spec{ID: "s-" + h.Name()}, Run{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0].ID != "s-gateway" || got[1].ID != "s-sandbox" {
		t.Fatalf("launched %+v", got)
	}
}

// TestShellPath: the gateway shell is $SHELL when it is a POSIX shell
// (each of them), else bash or sh from PATH; never a shell that reads the
// command another way.
func TestShellPath(t *testing.T) {
	for name := range posixShells {
		t.Setenv("SHELL", "/some/where/"+name)
		if got := ShellPath(); got != "/some/where/"+name {
			t.Errorf("SHELL=%s: %s", name, got)
		}
	}
	bash, errBash := exec.LookPath("bash")
	sh, _ := exec.LookPath("sh")
	for _, other := range []string{"/usr/bin/fish", "/bin/tcsh", "/bin/csh", "/usr/bin/nu", "/usr/bin/elvish", "/usr/bin/pwsh"} {
		t.Setenv("SHELL", other)
		got := ShellPath()
		if errBash == nil && got != bash || errBash != nil && got != sh && got != "/bin/sh" {
			t.Errorf("SHELL=%s: %s, want bash (%s) or sh", other, got, bash)
		}
	}
	t.Setenv("SHELL", "")
	if got := ShellPath(); got != sh && got != "/bin/sh" {
		t.Errorf("SHELL unset: %s, want sh", got)
	}
	t.Setenv("PATH", t.TempDir()) // no sh on PATH
	for _, s := range []string{"", "/usr/bin/fish"} {
		t.Setenv("SHELL", s)
		if got := ShellPath(); got != "/bin/sh" {
			t.Errorf("SHELL=%q, no shell on PATH: %s, want /bin/sh", s, got)
		}
	}
}

// TestExpandTilde: only "~" and "~/…" expand, to the home of the user
// conch runs as; "~user", a tilde inside, and an unknown home do not.
func TestExpandTilde(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for in, want := range map[string]string{"~": home, "~/a/b": filepath.Join(home, "a/b"), "~/": home} {
		if got, ok := ExpandTilde(in); !ok || got != want {
			t.Errorf("ExpandTilde(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"~root", "~root/x", "a/~", "/~/x", "", "x~"} {
		if got, ok := ExpandTilde(in); ok || got != in {
			t.Errorf("ExpandTilde(%q) = %q %v, want it unchanged", in, got, ok)
		}
	}
	t.Setenv("HOME", "")
	if got, ok := ExpandTilde("~/x"); ok || got != "~/x" {
		t.Errorf("no home: %q %v", got, ok)
	}
	if PrependPath([]string{"~/bin", " /opt/bin ", "/opt/bin", ""}, "/usr/bin:/opt/bin::") != "~/bin:/opt/bin:/usr/bin" {
		t.Errorf("PrependPath with no home: %q", PrependPath([]string{"~/bin", " /opt/bin ", "/opt/bin", ""}, "/usr/bin:/opt/bin::"))
	}
}
