package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/node/port"
	"github.com/conchsh/conch/policy"
)

// Node hosts. The gateway side: a run with host=node is
// planned here, prepared and started on the node through Options.Nodes,
// and mirrored into a local session whose journal the hub feeds. The node
// side (local.go): the node host (internal/node/agent) answers a gateway's
// requests, asking this engine to judge a command under this home's
// policy and to start a checked run as a session of this home.

// Nodes is the gateway's node hub as the engine uses it (defined below
// the engine, so that the hub never imports it).
type Nodes = port.Hub

// NodeRef names a selected node.
type NodeRef = port.Ref

// nodeError maps a node or hub error to an exec error: the node's refusals
// (SYSTEM_RUN_DENIED, SYSTEM_RUN_DISABLED, the approval codes) are denied,
// INVALID_REQUEST is invalid_argument, timeouts and lost links are
// node_unavailable.
func nodeError(err *apitype.Error) *apitype.Error {
	switch err.Code {
	case apitype.NodeRunDenied, apitype.NodeRunDisabled:
		return apitype.Errorf("denied", "%s", err.Message)
	case apitype.NodeInvalidRequest:
		return apitype.Errorf(apitype.CodeInvalidArgument, "%s", err.Message)
	case apitype.NodeUnavailable:
		return apitype.Errorf(apitype.CodeNodeUnavailable, "%s", err.Message)
	}
	return err
}

// nodeGate is the policy gate of a node run: the gateway's own settings
// (which may only tighten) travel with system.run.prepare; the node's
// verdict is authoritative. A run the node wants approved
// is prompted on the gateway like a gateway run.
func (e *Engine) nodeGate(ctx context.Context, agent string, p apitype.ExecParams, pl *plan) gateResult {
	eff := e.EffectivePolicy(agent, p.Security, p.Ask, pl.Command, pl.Cwd, "")
	if pl.Host == "sandbox" {
		podGate(&eff) // a kubernetes sandbox pod (podsandbox.go)
	}
	g := gateResult{requestID: newUUID(), eff: eff}
	if eff.Security == policy.SecurityDeny {
		g.result = execError(apitype.Errorf("denied", "exec denied: host=node security=deny (denied by the gateway's policy, before the node was asked: %s)", eff.SecuritySources))
		return g
	}
	var pp apitype.NodePrepareParams
	pp.Command, pp.RawCommand, pp.Cwd, pp.AgentID, pp.EnvHash = pl.Argv, pl.Command, pl.Node.Workdir, agent, pl.EnvHash
	pp.Tool.Security, pp.Tool.Ask = string(eff.Security), string(eff.Ask)
	// The caller's context: one that gives up stops waiting for the
	// node (conch stopping does not; see callerContext).
	ctx, stop := callerContext(ctx)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	rep, aerr := e.opt.Nodes.Prepare(ctx, pl.Node.Ref.ID, pp)
	if aerr != nil {
		g.result = execError(nodeError(aerr))
		return g
	}
	pl.Node.Prep = rep
	pl.Cwd = rep.Plan.Cwd
	if !rep.Verdict.RequiresApproval {
		g.run = true
		return g
	}
	g.decision = policy.Decision{Reason: rep.Verdict.Reason}
	g.result = e.requestApproval(agent, p, pl, g)
	return g
}

// nodePlanJSON is the run plan recorded with a node run's approval.
func nodePlanJSON(pl *plan) json.RawMessage {
	if pl.Node == nil {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"plan": pl.Node.Prep.Plan, "planHash": pl.Node.Prep.PlanHash})
	return b
}

// noticeHost is the host part of the approval events ("Exec denied
// (<host> id=…"):
// "gateway", or "node=<nodeId>".
func noticeHost(s *session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.NodeID != "" {
		return "node=" + s.st.NodeID
	}
	return "gateway"
}

// NodeBinding is the node agent's host=node calls are bound to (exec
// defaults > agents.<id>.tools.exec.node > tools.exec.node), or "".
func (e *Engine) NodeBinding(agent string) string {
	return firstNonEmpty(e.execDefaults(agent).Node, e.conf().Exec(agent).Node)
}

func nodeNameOf(pl *plan) string {
	if pl.Node == nil {
		return ""
	}
	return pl.Node.Ref.Name
}
