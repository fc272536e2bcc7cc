package agent

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/host/shellenv"
	"github.com/conchsh/conch/internal/node/port"
)

// The gateway's run requests: system.run.prepare judges a command under
// this node's policy and keeps a single-use plan; system.run checks the
// plan again just before the spawn and starts it as a supervised session
// of this home under the gateway's session id.

// plan is a prepared run plan kept until used or expired.
type plan struct {
	plan      apitype.NodePlan
	verdict   apitype.NodeVerdict
	pinned    string   // the pinned command text, if the policy pinned it
	persist   []string // what allow-always adds to this node's allowlist
	allowlist bool     // the effective security is allowlist
	recheck   func() (scriptSame, exesSame bool)
	used      bool
	expireAt  time.Time
}

// plans holds the prepared plans; guarded by its mutex.
type plans struct {
	mu sync.Mutex
	m  map[string]*plan
}

// put stores p, dropping the expired plans.
func (ps *plans) put(p *plan) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.m == nil {
		ps.m = map[string]*plan{}
	}
	now := time.Now()
	for id, x := range ps.m {
		if now.After(x.expireAt) {
			delete(ps.m, id)
		}
	}
	ps.m[p.plan.PlanID] = p
}

// take marks plan id used and returns it; nil when it is unknown, used
// or expired (single use, whatever follows).
func (ps *plans) take(id string) *plan {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.m[id]
	if p == nil || p.used || !time.Now().Before(p.expireAt) {
		return nil
	}
	p.used = true
	return p
}

func nodeErr(code, text string) *apitype.Error {
	return &apitype.Error{Code: code, Message: code + ": " + text}
}

// prepare is system.run.prepare: it canonicalises the cwd, pins the
// executables and the script operand, evaluates this home's policy, and
// keeps the single-use plan.
func (n *node) prepare(p apitype.NodePrepareParams) (apitype.NodePrepareReply, *apitype.Error) {
	var rep apitype.NodePrepareReply
	if !config.ValidAgent(p.AgentID) {
		return rep, nodeErr(apitype.NodeInvalidRequest, "invalid agentId")
	}
	script, ok := port.ShellScript(p.Command)
	if !ok {
		script = strings.Join(p.Command, " ")
	}
	if len(p.Command) == 0 || p.RawCommand != script {
		return rep, nodeErr(apitype.NodeInvalidRequest, "rawCommand does not match command")
	}
	j, err := n.opt.Engine.JudgeLocal(p.AgentID, p.Tool.Security, p.Tool.Ask, p.RawCommand, p.Cwd)
	if err != nil {
		return rep, nodeErr(apitype.NodeRunDenied, "approval requires an existing canonical cwd")
	}
	if j.FileErr != nil {
		return rep, nodeErr(apitype.NodeRunDenied, "exec approvals file unusable: "+j.FileErr.Error())
	}
	if j.SecurityDeny {
		return rep, nodeErr(apitype.NodeRunDisabled, "security=deny"+denyLayer(j, p.Tool.Security, p.Tool.Ask, j.OwnSecurityDeny))
	}
	pl := apitype.NodePlan{
		PlanID: newPlanID(), Argv: p.Command, RawCommand: p.RawCommand, Cwd: j.Cwd,
		CwdIdentity: j.CwdIdentity, EnvHash: p.EnvHash, AgentID: p.AgentID,
		ExpiresAtMs: time.Now().Add(j.ApprovalTimeout + 60*time.Second).UnixMilli(),
		Exes:        j.Exes, Script: j.Script,
	}
	verdict := apitype.NodeVerdict{Segments: j.Segments}
	switch j.Outcome {
	case "deny":
		reason := j.Reason
		if reason == "" || strings.Contains(reason, "allowlist miss") {
			reason = "allowlist miss"
		}
		return rep, nodeErr(apitype.NodeRunDenied, strings.TrimPrefix(reason, "exec denied: ")+denyLayer(j, p.Tool.Security, p.Tool.Ask, j.OwnDenies))
	case "run":
	default:
		verdict.RequiresApproval = true
		verdict.Reason = j.Reason
		if verdict.Reason == "" {
			verdict.Reason = "allowlist miss"
		}
		if j.Unpinned {
			return rep, nodeErr(apitype.NodeRunDenied, "approval requires a stable executable path")
		}
	}
	np := &plan{plan: pl, verdict: verdict, expireAt: time.UnixMilli(pl.ExpiresAtMs), persist: j.Persist, allowlist: j.Allowlist,
		recheck: j.Recheck}
	if j.Outcome == "run" && j.Pinned != "" && j.Allowlist {
		np.pinned = j.Pinned
	}
	n.plans.put(np)
	b, _ := json.Marshal(pl)
	sum := sha256.Sum256(b)
	return apitype.NodePrepareReply{PlanID: pl.PlanID, CmdText: p.RawCommand, Plan: pl, PlanHash: hex.EncodeToString(sum[:]), Verdict: verdict}, nil
}

// denyLayer names the layer that denied a node run, for the end of its
// message: the node's own policy (ownDenies: it denies the run alone,
// whatever the gateway sent), or the gateway's settings (gwSecurity,
// gwAsk: what the gateway's policy resolved, which only tightens)
// combined with the node's policy, which allows or asks alone.
func denyLayer(j port.Judgement, gwSecurity, gwAsk string, ownDenies bool) string {
	if ownDenies {
		return " (denied by the node's policy: " + j.Own + ")"
	}
	return fmt.Sprintf(" (denied by the gateway's policy combined with the node's: the gateway sent security=%s ask=%s, stricter than the node's own %s)", gwSecurity, gwAsk, j.Own)
}

// run is a streamed system.run: the plan is checked again just before
// the spawn and the run becomes a supervised session of this home under
// the gateway's session id.
func (n *node) run(p apitype.NodeRunParams) (apitype.NodeRunReply, *apitype.Error) {
	var rep apitype.NodeRunReply
	eng := n.opt.Engine
	if eng.Closed() {
		return rep, nodeErr(apitype.NodeUnavailable, "node is shutting down")
	}
	if !port.ValidSessionID(p.SessionID) {
		return rep, nodeErr(apitype.NodeInvalidRequest, "invalid sessionId")
	}
	// The session id first: a clash (the gateway retries with a fresh
	// id) must not use up the plan.
	release, err := eng.ReserveLocal(p.SessionID)
	if err != nil {
		if errors.Is(err, port.ErrSessionIDInUse) {
			return rep, &apitype.Error{Code: apitype.NodeSessionIDInUse, Message: apitype.NodeInvalidRequest + ": session id in use"}
		}
		return rep, nodeErr(apitype.NodeUnavailable, err.Error())
	}
	started := false
	defer func() { release(started) }()
	np := n.plans.take(p.PlanID)
	if np == nil {
		return rep, nodeErr(apitype.NodeRunDenied, "execution plan mismatch")
	}
	if e := checkPlan(np, p); e != nil {
		return rep, e
	}
	// A macOS node discards a PATH override (shellenv.NodeOverrides).
	overrides, _ := shellenv.NodeOverrides(runtime.GOOS, p.Env)
	if msg := shellenv.Validate(overrides); msg != "" {
		return rep, nodeErr(apitype.NodeInvalidRequest, msg)
	}
	if p.Approved && p.ApprovalDecision == "allow-always" && np.allowlist && len(np.persist) > 0 {
		// allow-always is persisted in this node's own file.
		eng.PersistAllow(p.AgentID, np.persist, p.RawCommand, p.RunID)
	}
	pl := np.plan
	stdin := p.Stdin
	switch {
	case p.PTY:
		stdin = "pty"
	case stdin != "open":
		stdin = "closed"
	}
	argv := pl.Argv
	if np.pinned != "" {
		argv = []string{argv[0], argv[1], np.pinned}
	}
	approvalID := ""
	if p.Approved {
		approvalID = p.RunID
	}
	pid, err := eng.StartLocal(port.LocalRun{
		SessionID: p.SessionID, Agent: p.AgentID, Command: p.RawCommand, Argv: argv, Pinned: np.pinned != "", Cwd: pl.Cwd,
		Env: p.Env, Overrides: overrides, EnvHash: pl.EnvHash, PTY: p.PTY, Stdin: stdin,
		Timeout: time.Duration(max(p.TimeoutMs, 0)) * time.Millisecond, RunID: p.RunID, ApprovalID: approvalID,
	})
	if err != nil {
		return rep, nodeErr(apitype.NodeUnavailable, err.Error())
	}
	started = true
	return apitype.NodeRunReply{SessionID: p.SessionID, PID: pid, Cwd: pl.Cwd}, nil
}

// checkPlan checks a run against its plan, just before the spawn: the
// same command, cwd, environment and agent, an approval where one is
// needed, and the cwd, the script operand and the executables unchanged.
func checkPlan(np *plan, p apitype.NodeRunParams) *apitype.Error {
	pl := np.plan
	if !slices.Equal(pl.Argv, p.Command) || pl.RawCommand != p.RawCommand || pl.Cwd != p.Cwd ||
		pl.EnvHash != host.EnvHash(p.Env) || pl.AgentID != p.AgentID {
		return nodeErr(apitype.NodeRunDenied, "execution plan mismatch")
	}
	if np.verdict.RequiresApproval && !p.Approved {
		return nodeErr(apitype.NodeRunDenied, "approval required")
	}
	if dev, ino, ok := fsutil.Identity(pl.Cwd); !ok || dev != pl.CwdIdentity[0] || ino != pl.CwdIdentity[1] {
		return nodeErr(apitype.NodeRunDenied, "approval cwd changed before execution")
	}
	if pl.Script != nil && fsutil.HashFile(pl.Script.Path) != pl.Script.SHA256 {
		return nodeErr(apitype.NodeRunDenied, "approval script operand changed before execution")
	}
	for _, x := range pl.Exes {
		if fsutil.HashFile(x.Path) != x.SHA256 {
			return nodeErr(apitype.NodeRunDenied, "approval executable changed before execution")
		}
	}
	// Resolve the command again: a word that is a symlink retargeted
	// since the plan names another file, while the planned realpaths
	// still hash the same (the run is the command as written unless it
	// was pinned).
	if p.Approved && np.pinned == "" {
		scriptSame, exesSame := np.recheck()
		if !scriptSame {
			return nodeErr(apitype.NodeRunDenied, "approval script operand changed before execution")
		}
		if !exesSame {
			return nodeErr(apitype.NodeRunDenied, "approval executable changed before execution")
		}
	}
	return nil
}

// newPlanID returns a random UUID (version 4) for a plan.
func newPlanID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
