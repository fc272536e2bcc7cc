package host

import (
	"context"
	"slices"
	"strings"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/host/shellenv"
	"github.com/conchsh/conch/internal/node/port"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

func init() { Register("node", func(d Deps) Host { return &nodeHost{d: d} }) }

// ErrSessionIDInUse is the start error of a node run whose session id the
// node already keeps (errors.Is): the engine retries with a fresh id.
var ErrSessionIDInUse error = &apitype.Error{Code: apitype.NodeSessionIDInUse}

// Nodes is the gateway's node hub as the node host uses it, and NodeRef
// a node it selected (internal/node/port).
type (
	Nodes   = port.Hub
	NodeRef = port.Ref
)

// NodeTarget is the node part of a gateway plan.
type NodeTarget struct {
	Ref      NodeRef
	Query    string
	Workdir  string // only an explicitly passed workdir
	Params   map[string]string
	Prep     apitype.NodePrepareReply
	Decision string // of the approval, when approved
}

// nodeHost runs commands on a paired node host through the gateway's
// node hub; the node's own policy decides (GateNode).
type nodeHost struct{ d Deps }

func (h *nodeHost) Name() string { return "node" }

// Plan selects the node and fills the parts of the plan that differ from
// a gateway run: the environment is the node's own plus the request's
// overrides, built on the node.
func (h *nodeHost) Plan(ctx context.Context, req Request, pl *Plan) *apitype.Error {
	p := req.Params
	if h.d.Nodes == nil {
		return apitype.Errorf(apitype.CodeNodeUnavailable, "exec host=node requires a paired node (none available). This requires a node host (conch node).")
	}
	binding := ""
	if h.d.NodeBinding != nil {
		binding = h.d.NodeBinding(pl.Agent)
	}
	query := p.Node
	if binding != "" {
		if p.Node != "" && !SameNodeRef(p.Node, binding) {
			return apitype.Errorf(apitype.CodeNodeNotAllowed, "exec node not allowed (bound to %s)", binding)
		}
		query = binding
	}
	ref, aerr := h.d.Nodes.Select(query)
	if aerr != nil {
		return aerr
	}
	if pl.PTY && !slices.Contains(ref.Caps, "pty") {
		pl.Warnings = append(pl.Warnings, "Warning: this node does not support PTY; running without it.")
		pl.PTY = false
	}
	if msg := shellenv.Validate(p.Env); msg != "" {
		return apitype.Errorf(apitype.CodeSecurity, "%s", msg)
	}
	if len(pl.Set.PathPrepend) > 0 {
		pl.Warnings = append(pl.Warnings, "Warning: tools.exec.pathPrepend is ignored for host=node. Configure PATH on the node host/service instead.")
	}
	pl.Host = "node"
	pl.Gate = GateNode
	pl.Node = &NodeTarget{Ref: ref, Query: query, Workdir: p.Workdir, Params: p.Env}
	pl.Cwd = p.Workdir
	pl.EnvKeys = SortedKeys(p.Env)
	pl.EnvHash = EnvHash(p.Env)
	pl.Argv = []string{"/bin/sh", "-lc", p.Command}
	if !pl.PTY && pl.Stdin == "pty" {
		pl.Stdin = "open"
	}
	return nil
}

// Start starts a planned node run through the hub.
func (h *nodeHost) Start(ctx context.Context, pl *Plan, spec proto.Spec, r Run) (*proto.Handle, error) {
	spec.Host = "node"
	run := apitype.NodeRunParams{
		PlanID: pl.Node.Prep.PlanID, Command: pl.Argv, RawCommand: pl.Command, Cwd: pl.Cwd, Env: pl.Node.Params,
		TimeoutMs: pl.Timeout.Milliseconds(), AgentID: pl.Agent, RunID: r.RequestID, SessionID: spec.ID,
		Approved: r.ApprovalID != "", Stream: true, PTY: pl.PTY, Cols: spec.Cols, Rows: spec.Rows, Stdin: pl.Stdin,
	}
	if r.ApprovalID != "" {
		run.RunID, run.ApprovalDecision = r.ApprovalID, pl.Node.Decision
	}
	return h.d.Nodes.Start(pl.Node.Ref.ID, spec, run)
}

// SameNodeRef reports whether two node references are the same reference
// (same kind, same value once normalised): a call may repeat its agent's
// binding in another spelling, never name the node another way.
func SameNodeRef(a, b string) bool {
	ra, err1 := apitype.ParseNodeRef(a)
	rb, err2 := apitype.ParseNodeRef(b)
	if err1 != nil || err2 != nil {
		return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
	}
	return ra == rb
}

// NodeEnv is the environment of a run on a node host (built on the node):
// the node's sanitised environment (PATH included: the node service's,
// no login-shell probe), its non-interactive defaults, then the request's
// overrides (already validated) and the markers; a PTY gets
// TERM=xterm-256color.
func NodeEnv(nonInteractive, overrides map[string]string, pty bool) []string {
	return EnvSpec{Base: InheritedBase(), Layers: []map[string]string{nonInteractive, overrides}, PTY: pty, Term: "xterm-256color"}.Build()
}
