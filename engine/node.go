package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/approvals"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/fsutil"
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/hostenv"
	"github.com/conchsh/conch/internal/nodeport"
	"github.com/conchsh/conch/internal/supervisor"
	"github.com/conchsh/conch/internal/supervisor/proto"
	"github.com/conchsh/conch/policy"
)

// Node hosts. The gateway side: a run with host=node is
// planned here, prepared and started on the node through Options.Nodes,
// and mirrored into a local session whose journal the hub feeds. The node
// side: NodePrepare and NodeRun run a gateway's request on this engine's
// own home, under this home's policy.

// Nodes is the gateway's node hub as the engine uses it (defined below
// the engine, so that the hub never imports it).
type Nodes = nodeport.Hub

// NodeRef names a selected node.
type NodeRef = nodeport.Ref

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

// Node side.

// nodePlan is a prepared run plan kept by a node until used or expired.
type nodePlan struct {
	plan     apitype.NodePlan
	verdict  apitype.NodeVerdict
	pinned   string              // the pinned command text, if the policy pinned it
	request  policy.Request      // what was evaluated, to resolve it again before the run
	resolved []approvals.Segment // what each segment resolved to
	persist  []string            // what allow-always adds to this node's allowlist
	security policy.Security
	used     bool
	expireAt time.Time
}

// nodePlans holds a node's prepared plans; guarded by its mutex.
type nodePlans struct {
	mu sync.Mutex
	m  map[string]*nodePlan
}

func nodeErr(code, text string) *apitype.Error {
	return &apitype.Error{Code: code, Message: code + ": " + text}
}

// NodePrepare is system.run.prepare on a node host: it
// canonicalises the cwd, pins the executables and the script operand,
// evaluates this home's policy, and keeps the single-use plan.
func (e *Engine) NodePrepare(p apitype.NodePrepareParams) (apitype.NodePrepareReply, *apitype.Error) {
	var rep apitype.NodePrepareReply
	if !config.ValidAgent(p.AgentID) {
		return rep, nodeErr(apitype.NodeInvalidRequest, "invalid agentId")
	}
	script, ok := shellScript(p.Command)
	if !ok {
		script = strings.Join(p.Command, " ")
	}
	if len(p.Command) == 0 || p.RawCommand != script {
		return rep, nodeErr(apitype.NodeInvalidRequest, "rawCommand does not match command")
	}
	set := e.conf().Exec(p.AgentID)
	cwd, _ := expandTilde(p.Cwd) // this host's home, as on the gateway
	if cwd == "" {
		cwd = firstNonEmpty(set.Workspace)
		if cwd == "" {
			cwd = e.cwd
		}
	}
	canon, err := filepath.EvalSymlinks(cwd)
	if err == nil {
		canon, err = filepath.Abs(canon)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Stat(canon)
	}
	if err != nil || !fi.IsDir() {
		return rep, nodeErr(apitype.NodeRunDenied, "approval requires an existing canonical cwd")
	}
	dev, ino, _ := fileIdentity(canon, fi)
	env := e.nodeEnv(set, nil, false)
	eff := e.EffectivePolicy(p.AgentID, p.Tool.Security, p.Tool.Ask, p.RawCommand, canon, envValue(env, "PATH"))
	if eff.FileErr != nil {
		return rep, nodeErr(apitype.NodeRunDenied, "exec approvals file unusable: "+eff.FileErr.Error())
	}
	// own is this node's policy alone, without the gateway's settings:
	// a denial says which of the two layers denied.
	own := e.EffectivePolicy(p.AgentID, "", "", p.RawCommand, canon, envValue(env, "PATH"))
	if eff.Security == policy.SecurityDeny {
		return rep, nodeErr(apitype.NodeRunDisabled, "security=deny"+denyLayer(own, p.Tool.Security, p.Tool.Ask, own.Security == policy.SecurityDeny))
	}
	// The plan is prepared before the run says whether it has a PTY:
	// judge it as if it had one (nohup then writes nohup.out).
	eff.Request.Terminal = true
	own.Request.Terminal = true
	d := policy.Evaluate(eff.Request)
	plan := apitype.NodePlan{
		PlanID: newUUID(), Argv: p.Command, RawCommand: p.RawCommand, Cwd: canon,
		CwdIdentity: [2]uint64{dev, ino}, EnvHash: p.EnvHash, AgentID: p.AgentID,
		ExpiresAtMs: time.Now().Add(e.conf().ApprovalTimeout() + 60*time.Second).UnixMilli(),
	}
	verdict := apitype.NodeVerdict{Segments: []string{}}
	unpinned := false
	walkSegments(d.Analysis.Parts, func(s policy.Segment) {
		verdict.Segments = append(verdict.Segments, s.Text)
		if s.RealPath == "" {
			unpinned = true
			return
		}
		plan.Exes = append(plan.Exes, apitype.NodePlanExe{Path: s.RealPath, SHA256: fileSHA256(s.RealPath)})
	})
	if sc := scriptOperand(d, canon); sc != nil {
		plan.Script = &apitype.NodePlanExe{Path: sc.Path, SHA256: sc.SHA256}
	}
	switch d.Outcome {
	case policy.OutcomeDeny:
		reason := d.Reason
		if reason == "" || strings.Contains(reason, "allowlist miss") {
			reason = "allowlist miss"
		}
		alone := policy.Evaluate(own.Request).Outcome == policy.OutcomeDeny
		return rep, nodeErr(apitype.NodeRunDenied, strings.TrimPrefix(reason, "exec denied: ")+denyLayer(own, p.Tool.Security, p.Tool.Ask, alone))
	case policy.OutcomeRun:
	default:
		verdict.RequiresApproval = true
		verdict.Reason = d.Reason
		if verdict.Reason == "" {
			verdict.Reason = "allowlist miss"
		}
		if unpinned {
			return rep, nodeErr(apitype.NodeRunDenied, "approval requires a stable executable path")
		}
	}
	np := &nodePlan{plan: plan, verdict: verdict, expireAt: time.UnixMilli(plan.ExpiresAtMs), persist: d.Persist, security: eff.Security,
		request: eff.Request, resolved: resolution(d)}
	if d.Outcome == policy.OutcomeRun && d.Pinned != "" && eff.Security == policy.SecurityAllowlist {
		np.pinned = d.Pinned
	}
	e.nodes.mu.Lock()
	if e.nodes.m == nil {
		e.nodes.m = map[string]*nodePlan{}
	}
	now := time.Now()
	for id, x := range e.nodes.m {
		if now.After(x.expireAt) {
			delete(e.nodes.m, id)
		}
	}
	e.nodes.m[plan.PlanID] = np
	e.nodes.mu.Unlock()
	b, _ := json.Marshal(plan)
	sum := sha256.Sum256(b)
	return apitype.NodePrepareReply{PlanID: plan.PlanID, CmdText: p.RawCommand, Plan: plan, PlanHash: hex.EncodeToString(sum[:]), Verdict: verdict}, nil
}

// denyLayer names the layer that denied a node run, for the end of its
// message: the node's own policy (own; ownDenies: it denies the run
// alone, whatever the gateway sent), or the gateway's settings
// (gwSecurity, gwAsk: what the gateway's policy resolved, which only
// tightens) combined with the node's policy, which allows or asks alone.
func denyLayer(own Policy, gwSecurity, gwAsk string, ownDenies bool) string {
	node := fmt.Sprintf("security=%s ask=%s (%s)", own.Security, own.Ask, own.SecuritySources)
	if ownDenies {
		return " (denied by the node's policy: " + node + ")"
	}
	return fmt.Sprintf(" (denied by the gateway's policy combined with the node's: the gateway sent security=%s ask=%s, stricter than the node's own %s)", gwSecurity, gwAsk, node)
}

// shellScript returns the inline script of a shell-wrapper argv.
func shellScript(argv []string) (string, bool) {
	if len(argv) == 3 && (argv[1] == "-lc" || argv[1] == "-c") {
		switch filepath.Base(argv[0]) {
		case "sh", "bash", "dash", "zsh":
			return argv[2], true
		}
	}
	return "", false
}

// nodeEnv is the environment of a node run: see
// host.NodeEnv.
func (e *Engine) nodeEnv(set config.ExecSettings, overrides map[string]string, pty bool) []string {
	return host.NodeEnv(set.NonInteractiveEnv, overrides, pty)
}

var nodeSessionID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// NodeRun is a streamed system.run on a node host: the plan is re-checked
// just before the spawn and the run becomes a supervised
// session of this home under the gateway's session id.
func (e *Engine) NodeRun(p apitype.NodeRunParams) (apitype.NodeRunReply, *apitype.Error) {
	var rep apitype.NodeRunReply
	if e.isClosed() {
		return rep, nodeErr(apitype.NodeUnavailable, "node is shutting down")
	}
	if !nodeSessionID.MatchString(p.SessionID) {
		return rep, nodeErr(apitype.NodeInvalidRequest, "invalid sessionId")
	}
	// The session id first: a clash (the gateway retries with a fresh
	// id) must not use up the plan.
	dir := proto.SessionDir(e.home, p.SessionID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if os.IsExist(err) {
			return rep, &apitype.Error{Code: apitype.NodeSessionIDInUse, Message: apitype.NodeInvalidRequest + ": session id in use"}
		}
		return rep, nodeErr(apitype.NodeUnavailable, fmt.Sprintf("conch home %s is not writable (%v)", e.home, err))
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	e.nodes.mu.Lock()
	np := e.nodes.m[p.PlanID]
	usable := np != nil && !np.used && time.Now().Before(np.expireAt)
	if usable {
		np.used = true // single use, whatever follows
	}
	e.nodes.mu.Unlock()
	if !usable {
		return rep, nodeErr(apitype.NodeRunDenied, "execution plan mismatch")
	}
	pl := np.plan
	if !slices.Equal(pl.Argv, p.Command) || pl.RawCommand != p.RawCommand || pl.Cwd != p.Cwd ||
		pl.EnvHash != envHash(p.Env) || pl.AgentID != p.AgentID {
		return rep, nodeErr(apitype.NodeRunDenied, "execution plan mismatch")
	}
	if np.verdict.RequiresApproval && !p.Approved {
		return rep, nodeErr(apitype.NodeRunDenied, "approval required")
	}
	if id := dirIdentity(pl.Cwd); id == nil || id.Device != pl.CwdIdentity[0] || id.Inode != pl.CwdIdentity[1] {
		return rep, nodeErr(apitype.NodeRunDenied, "approval cwd changed before execution")
	}
	if pl.Script != nil && hashFile(pl.Script.Path) != pl.Script.SHA256 {
		return rep, nodeErr(apitype.NodeRunDenied, "approval script operand changed before execution")
	}
	for _, x := range pl.Exes {
		if hashFile(x.Path) != x.SHA256 {
			return rep, nodeErr(apitype.NodeRunDenied, "approval executable changed before execution")
		}
	}
	// Resolve the command again: a word that is a symlink retargeted
	// since the plan names another file, while the planned realpaths
	// still hash the same (the run is the command as written unless it
	// was pinned).
	if p.Approved && np.pinned == "" {
		d := policy.Evaluate(np.request)
		var then *approvals.FileDigest
		if pl.Script != nil {
			then = &approvals.FileDigest{Path: pl.Script.Path, SHA256: pl.Script.SHA256}
		}
		if !sameScript(scriptOperand(d, pl.Cwd), then) {
			return rep, nodeErr(apitype.NodeRunDenied, "approval script operand changed before execution")
		}
		if !sameResolution(resolution(d), np.resolved) {
			return rep, nodeErr(apitype.NodeRunDenied, "approval executable changed before execution")
		}
	}
	// A macOS node discards a PATH override (hostenv.NodeOverrides).
	overrides, _ := hostenv.NodeOverrides(runtime.GOOS, p.Env)
	if msg := hostenv.Validate(overrides); msg != "" {
		return rep, nodeErr(apitype.NodeInvalidRequest, msg)
	}
	if p.Approved && p.ApprovalDecision == "allow-always" && np.security == policy.SecurityAllowlist && len(np.persist) > 0 {
		// allow-always is persisted in this node's own file.
		before, _ := approvals.Load(e.home)
		if added, err := approvals.AddAllow(e.home, p.AgentID, np.persist, p.RawCommand); err != nil {
			e.log.Warn("persist allow-always", "err", err)
		} else if len(added) > 0 {
			if after, err := approvals.Load(e.home); err == nil {
				RecordPolicyChange(e.home, before, after, "gateway:"+p.RunID)
			}
		}
	}
	set := e.conf().Exec(p.AgentID)
	stdin := p.Stdin
	switch {
	case p.PTY:
		stdin = "pty"
	case stdin != "open":
		stdin = "closed"
	}
	env := e.nodeEnv(set, overrides, p.PTY)
	argv := pl.Argv
	if np.pinned != "" {
		argv = []string{argv[0], argv[1], np.pinned}
	}
	argv = nodeShellArgv(argv)
	var keys []string
	for k := range p.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	run := &plan{
		Agent: p.AgentID, Command: p.RawCommand, Argv: argv, Env: env, EnvKeys: keys, Cwd: pl.Cwd, Host: "node",
		PTY: p.PTY, Stdin: stdin, Timeout: time.Duration(max(p.TimeoutMs, 0)) * time.Millisecond, Set: set, EnvHash: pl.EnvHash,
		Local: true,
	}
	s := e.newSession(p.SessionID, dir, p.AgentID)
	s.st = state{
		Agent: p.AgentID, Command: p.RawCommand, Name: deriveName(p.RawCommand), Cwd: pl.Cwd, Host: "node",
		PTY: p.PTY, CreatedAt: time.Now().UnixMilli(), TimeoutSec: run.Timeout.Seconds(), Backgrounded: true,
		Gated: true, Notice: noticeState{Queued: true}, // the gateway tells its agent
	}
	if err := s.saveLocked(); err != nil {
		return rep, nodeErr(apitype.NodeUnavailable, err.Error())
	}
	approvalID := ""
	if p.Approved {
		approvalID = p.RunID
	}
	if err := e.launch(s, run, apitype.ExecParams{Command: p.RawCommand, Env: p.Env}, p.RunID, approvalID, np.pinned != ""); err != nil {
		e.removeSession(s)
		return rep, nodeErr(apitype.NodeUnavailable, "spawn failed: "+err.Error())
	}
	ok = true
	s.mu.Lock()
	pid := s.pid
	s.mu.Unlock()
	return apitype.NodeRunReply{SessionID: s.id, PID: pid, Cwd: pl.Cwd}, nil
}

// NodeSession returns the directory of session id on this home and a
// channel closed at its next change; ok is false for an unknown id.
func (e *Engine) NodeSession(id string) (dir string, changed <-chan struct{}, ok bool) {
	s, _ := e.sessions.Get(id)
	if s == nil {
		if !nodeSessionID.MatchString(id) {
			return "", nil, false
		}
		// Finished and swept from the registry, or never known: the
		// files tell.
		d := proto.SessionDir(e.home, id)
		if _, err := os.Stat(d); err != nil {
			return "", nil, false
		}
		c := make(chan struct{})
		close(c)
		return d, c, true
	}
	return s.dir, s.changed(), true
}

// NodeEnd returns the final end state of session id on this home once it
// has one, and its command: the registry's, known as soon as the
// supervisor reports the end (its exit.json and meta.json may be written
// later, or not at all for a session that ended at once), or, for a
// session no longer registered, its files'.
func (e *Engine) NodeEnd(id string) (ex proto.Exit, command string, ended bool) {
	s, _ := e.sessions.Get(id)
	var dir string
	if s == nil {
		if !nodeSessionID.MatchString(id) {
			return proto.Exit{}, "", false
		}
		dir = proto.SessionDir(e.home, id)
		var ok bool
		if ex, ok, _ = proto.ReadExit(dir); !ok || !ex.Final {
			return proto.Exit{}, "", false
		}
	} else {
		_, exit, _ := s.snapshot()
		if exit == nil {
			return proto.Exit{}, "", false
		}
		ex, dir = *exit, s.dir
		s.mu.Lock()
		command = s.meta.Command
		s.mu.Unlock()
	}
	if command == "" {
		var meta proto.Meta
		fsutil.ReadJSON(proto.MetaPath(dir), &meta)
		command = meta.Command
	}
	return ex, command, true
}

// NodeCall forwards a control request of the gateway to the supervisor of
// session id (system.session.*).
func (e *Engine) NodeCall(id string, req proto.Request) (proto.Reply, error) {
	s, _ := e.sessions.Get(id)
	if s == nil {
		return proto.Reply{}, fmt.Errorf("No session found for %s", id)
	}
	if !s.running() {
		return proto.Reply{}, fmt.Errorf("No active session found for %s", id)
	}
	if req.Op == "kill" {
		s.update(func(st *state) { st.AgentEnded = true })
	}
	req.Session = s.id
	return supervisor.Call(s.socket, req)
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
