package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/store/ledger"
	"github.com/conchsh/conch/internal/term/render"
	"github.com/conchsh/conch/policy"
)

// pendingRun is what an approved run needs that is not on disk: the
// prepared plan (env values are never persisted).
type pendingRun struct {
	plan   *plan
	params apitype.ExecParams
	req    *approvals.Request
	gate   gateResult
}

// requestApproval reserves the session, persists the approval request and
// returns the approval-pending result.
func (e *Engine) requestApproval(agent string, p apitype.ExecParams, pl *plan, g gateResult) apitype.Result {
	id, dir, err := e.newID()
	if err != nil {
		return execError(apitype.Errorf("approval_failed", "Exec approval registration failed: %v", err))
	}
	var segs []approvals.Segment
	var shown []apitype.ApprovalSegment
	walkSegments(g.decision.Analysis.Parts, func(s policy.Segment) {
		segs = append(segs, approvals.Segment{Text: s.Text, Exe: s.Exe, RealPath: s.RealPath, SHA256: fileSHA256(s.RealPath), Verdict: s.Verdict, Rule: s.Rule})
		shown = append(shown, apitype.ApprovalSegment{Text: s.Text, Verdict: s.Verdict})
	})
	if shown == nil {
		shown = []apitype.ApprovalSegment{}
	}
	reason := g.decision.Reason
	if reason == "" {
		reason = "allowlist miss"
	}
	script := scriptOperand(g.decision, pl.Cwd)
	req, err := e.store.Create(approvals.Request{
		Script: script,
		Agent:  agent, SessionID: id, RequestID: g.requestID, Host: pl.Host, NodeID: nodeIDOf(pl), Plan: nodePlanJSON(pl), Command: pl.Command, Argv: pl.Argv,
		Cwd: pl.Cwd, CwdIdentity: dirIdentity(pl.Cwd), EnvKeys: nonNil(pl.EnvKeys), EnvHash: pl.EnvHash,
		Segments: segs, Reason: reason, Security: string(g.eff.Security), Ask: string(g.eff.Ask),
		AskFallback: string(g.eff.AskFallback), Persist: g.decision.Persist,
		ExpiresAtMs: time.Now().Add(e.conf().ApprovalTimeout()).UnixMilli(),
		Holder:      approvals.HolderSelf(), // the plan lives only in this process
	})
	if err != nil {
		os.RemoveAll(dir)
		return execError(apitype.Errorf("approval_failed", "Exec approval registration failed: %v", err))
	}
	s := e.newSession(id, dir, agent)
	s.st = state{
		Agent: agent, Command: pl.Command, Name: deriveName(pl.Command), Cwd: pl.Cwd, Host: pl.Host, PTY: pl.PTY,
		CreatedAt: time.Now().UnixMilli(), Backgrounded: true, PendingApprovalID: req.ID, Gated: true, NodeID: nodeIDOf(pl),
		Notice: noticeState{Queued: true}, // its approval events tell the agent
	}
	s.start = time.UnixMilli(s.st.CreatedAt)
	s.approval = req
	s.pendingRun = &pendingRun{plan: pl, params: p, req: req, gate: g}
	s.mu.Lock()
	err = s.saveLocked()
	s.mu.Unlock()
	if err != nil {
		// Without its state.json the reservation would not survive a
		// restart: refuse it now rather than promise a decision.
		e.store.Drop(req.ID, "its session could not be recorded")
		e.removeSession(s)
		return execError(apitype.Errorf("approval_failed", "Exec approval registration failed: %v", err))
	}
	e.appendLedger(ledger.Record{Type: ledger.TypeRequest, Agent: agent, Fields: ledger.Request{
		RequestID: g.requestID, ApprovalID: req.ID, Slug: req.Slug, ExpiresAtMs: req.ExpiresAtMs, Routes: []string{"cli"},
	}}, true)
	e.sessions.Put(id, s)
	e.emit("approval.requested", "", req)
	e.wg.Add(1)
	go e.awaitDecision(s)

	text := fmt.Sprintf("Approval required (id %s). Approve to run; updates will arrive after completion.\nReason: %s\nSession: %s (poll it with process for the outcome)", req.Slug, reason, id)
	return apitype.Result{Text: withWarnings(pl.Warnings, text), Details: &apitype.ApprovalDetails{
		Status: "approval-pending", ApprovalID: req.ID, ApprovalSlug: req.Slug, SessionID: id, ExpiresAtMs: req.ExpiresAtMs,
		Host: pl.Host, NodeID: nodeIDOf(pl), NodeName: nodeNameOf(pl), Command: pl.Command, Cwd: pl.Cwd, Reason: reason, Segments: shown, Warnings: pl.Warnings,
	}}
}

// awaitDecision watches a pending approval until it is decided (by any
// process on this home: CLI, another engine's API) or expires.
func (e *Engine) awaitDecision(s *session) {
	defer e.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-s.ended:
			return
		case <-t.C:
		}
		s.mu.Lock()
		req := s.approval
		s.mu.Unlock()
		if req == nil {
			return
		}
		cur, err := e.store.Get(req.ID)
		if err != nil {
			if s.claim() {
				e.deny(s, "approval-request-failed", "")
			}
			return
		}
		if cur.State != approvals.Pending && !s.claim() {
			return // withdrawn by the agent meanwhile
		}
		if cur.State != approvals.Pending {
			e.traceApproval(s, cur)
			e.emit("approval.resolved", s.agent, map[string]any{"id": cur.ID, "slug": cur.Slug, "decision": cur.Decision,
				"decidedBy": cur.DecidedBy, "decidedAt": cur.DecidedAtMs, "sessionId": cur.SessionID})
		}
		switch cur.State {
		case approvals.Allowed:
			e.approved(s, cur, string(cur.Decision), cur.DecidedBy, "")
			return
		case approvals.Denied:
			by := cur.DecidedBy
			e.appendLedger(ledger.Record{Type: ledger.TypeDecision, Agent: s.agent, Fields: ledger.Decision{
				ApprovalID: cur.ID, Decision: "deny", DecidedBy: by, Persisted: []string{}}}, true)
			if by == "agent" {
				e.deny(s, "user-denied", "withdrawn")
			} else {
				e.deny(s, "user-denied", "")
			}
			return
		case approvals.Expired:
			// Expired by another session's watcher (Expire takes every
			// due request): the askFallback still applies.
			e.emit("approval.expired", s.agent, map[string]any{"id": cur.ID, "askFallback": cur.AskFallback})
			e.timedOut(s, cur)
			return
		case approvals.Consumed:
			e.deny(s, "approval-timeout", "")
			return
		}
		if time.Now().UnixMilli() >= cur.ExpiresAtMs {
			expired, _ := e.store.Expire(time.Now())
			for _, x := range expired {
				if x.ID == cur.ID && s.claim() {
					e.traceApproval(s, x)
					e.emit("approval.expired", s.agent, map[string]any{"id": x.ID, "askFallback": x.AskFallback})
					e.timedOut(s, x)
					return
				}
			}
		}
	}
}

// timedOut applies askFallback to an expired approval.
func (e *Engine) timedOut(s *session, req *approvals.Request) {
	fallback := policy.Security(req.AskFallback)
	decide := func(outcome string) {
		e.appendLedger(ledger.Record{Type: ledger.TypeDecision, Agent: s.agent, Fields: ledger.Decision{
			ApprovalID: req.ID, Decision: "timeout", DecidedBy: "timeout", Fallback: string(fallback), Persisted: []string{}}}, true)
		_ = outcome
	}
	switch fallback {
	case policy.SecurityFull:
		decide("run")
		e.approved(s, req, "timeout", "timeout", "")
	case policy.SecurityAllowlist:
		s.mu.Lock()
		pr := s.pendingRun
		s.mu.Unlock()
		ok := false
		if pr != nil {
			r := pr.gate.eff.Request
			r.Ask = policy.AskOff
			r.Security = policy.SecurityAllowlist
			d := policy.Evaluate(r)
			ok = d.Outcome == policy.OutcomeRun
			if ok && d.Pinned != "" && pr.plan.Node == nil && len(pr.plan.Argv) == 3 {
				// Run what the allowlist judged, as an auto-allowed
				// command does: the pinned text, not the command as
				// written (the parser and the shell may read it apart).
				pr.plan.Argv[2] = d.Pinned
				pr.gate.pinned = true
			}
		}
		if ok {
			decide("run")
			e.approved(s, req, "timeout", "timeout", "")
			return
		}
		decide("deny")
		e.deny(s, "approval-timeout (allowlist-miss)", "")
	default:
		decide("deny")
		e.deny(s, "approval-timeout", "")
	}
}

// deny ends a pending session in state denied and tells
// the agent.
func (e *Engine) deny(s *session, reason, how string) {
	s.mu.Lock()
	req := s.approval
	s.approval = nil
	s.pendingRun = nil
	s.mu.Unlock()
	now := time.Now()
	ex := proto.Exit{State: proto.StateDenied, Reason: reason, EndedAt: now.UnixMilli(), Final: true}
	ex = e.recordExit(s, ex, true)
	s.update(func(st *state) { st.PendingApprovalID = "" })
	e.ledgerEnd(s, ex, true)
	st, _, _ := s.snapshot()
	if how != "withdrawn" && !st.Hidden && req != nil {
		e.queueNotice(s, apitype.Notice{Kind: "denied", SessionID: s.id, ApprovalID: req.ID,
			Text: fmt.Sprintf("Exec denied (%s id=%s, %s): %s", noticeHost(s), req.ID, reason, st.Command)})
	}
	e.ended(s, ex)
}

// approved runs an approved request under its reserved session id: the
// allow-once is consumed first, allow-always persists patterns, and the
// run plan is re-checked.
func (e *Engine) approved(s *session, req *approvals.Request, decision, decidedBy, _ string) {
	s.mu.Lock()
	pr := s.pendingRun
	s.mu.Unlock()
	var persisted []string
	note := ""
	if decision == string(approvals.AllowAlways) {
		persisted, note = e.persistAllowAlways(s, req, pr, decidedBy)
	}
	if decidedBy != "timeout" {
		e.appendLedger(ledger.Record{Type: ledger.TypeDecision, Agent: s.agent, Fields: ledger.Decision{
			ApprovalID: req.ID, Decision: decision, DecidedBy: decidedBy, Persisted: nonNil(persisted)}}, true)
	}
	approvedStep("recorded")
	if _, err := e.store.Consume(req.ID); err != nil && decidedBy != "timeout" {
		e.deny(s, "approval-request-failed", "")
		return
	}
	if pr == nil {
		// The engine restarted after the decision and before the run:
		// the prepared plan (with its env values) is gone.
		e.deny(s, reasonDropped+" (the gateway restarted before the approved run started)", "")
		return
	}
	if !planUnchanged(req) || (pr.plan.Node == nil && !resolvesAsApproved(req, pr)) {
		e.deny(s, "approval plan changed before execution", "")
		return
	}
	pl := pr.plan
	if pl.Node != nil {
		pl.Node.Decision = decision // the node persists allow-always itself
	}
	// Approved runs: backgrounded, no exit notice, the effective timeout
	// (explicit, else timeoutSec) with no background exemption.
	if pr.params.Timeout == nil {
		pl.Timeout = pl.Set.Timeout
	}
	if pl.Stdin == "closed" && pr.params.Background != nil && *pr.params.Background {
		pl.Stdin = "open"
	}
	approvedStep("consumed")
	s.mu.Lock()
	s.approval = nil
	s.pendingRun = nil
	s.approvalID = req.ID
	s.mu.Unlock()
	s.update(func(st *state) {
		st.PendingApprovalID = ""
		st.ApprovalID = req.ID
		st.TimeoutSec = pl.Timeout.Seconds()
		st.Notice.Queued = true // gated runs use the approval events instead
	})
	if note != "" {
		e.queueNotice(s, apitype.Notice{Kind: "running", SessionID: s.id, ApprovalID: req.ID, Text: note})
	}
	approvedStep("marked")
	if err := e.launch(s, pl, pr.params, pr.gate.requestID, req.ID, pr.gate.pinned); err != nil {
		// The approval was granted; the run never started. The ledger
		// says so after the decision, and the reason names both.
		reason := fmt.Sprintf("spawn-failed (%s; the start failed: %v)", grantedBy(decision, decidedBy), err)
		if pl.Node != nil {
			reason = err.Error() // the node's refusal
		}
		e.appendLedger(ledger.Record{Type: ledger.TypeDecision, Agent: s.agent, Fields: ledger.Decision{
			ApprovalID: req.ID, Decision: "dropped", DecidedBy: "engine", Persisted: []string{}}}, true)
		e.deny(s, reason, "")
		return
	}
	if st, _, _ := s.snapshot(); st.Hidden {
		// Withdrawn (process remove) while it was starting: stop it now
		// that it has a supervisor.
		e.killSession(s, proto.KilledByAgent)
	}
	if n := pl.Set.ApprovalRunningNotice; n > 0 {
		e.wg.Add(1)
		go e.runningNotice(s, req, n)
	}
}

// runningNotice tells the agent, after n, that its approved run is still
// running (unless it ended or the engine stops first). The caller has
// added it to e.wg.
func (e *Engine) runningNotice(s *session, req *approvals.Request, n time.Duration) {
	defer e.wg.Done()
	select {
	case <-s.ended:
	case <-e.stop:
	case <-time.After(n):
		secs := max(1, int((n+500*time.Millisecond)/time.Second))
		e.queueNotice(s, apitype.Notice{Kind: "running", SessionID: s.id, ApprovalID: req.ID,
			Text: fmt.Sprintf("Exec running (%s id=%s, session=%s, >%ds): %s", noticeHost(s), req.ID, s.id, secs, req.Command)})
	}
}

// persistAllowAlways adds what an allow-always decision persists to the
// agent's allowlist (a gateway run under security allowlist only), with
// its ledger record, and returns the patterns added and, when nothing
// was, the note that says why.
func (e *Engine) persistAllowAlways(s *session, req *approvals.Request, pr *pendingRun, decidedBy string) (persisted []string, note string) {
	if pr != nil && pr.plan.Node == nil && pr.gate.eff.Security == policy.SecurityAllowlist && len(req.Persist) > 0 {
		before, _ := approvals.Load(e.home)
		added, err := approvals.AddAllow(e.home, s.agent, req.Persist, req.Command)
		if err != nil {
			e.log.Warn("persist allow-always", "err", err)
		}
		for _, a := range added {
			persisted = append(persisted, a.Pattern)
		}
		if len(added) > 0 {
			after, _ := approvals.Load(e.home)
			e.appendLedger(ledger.Record{Type: ledger.TypePolicy, Agent: s.agent, Fields: policyFields(before, after, decidedBy)}, true)
		}
	}
	if len(persisted) == 0 && (pr == nil || pr.plan.Node == nil) {
		why := "no executable to persist"
		if pr != nil && pr.gate.eff.Security != policy.SecurityAllowlist {
			why = "security is not allowlist"
		}
		note = fmt.Sprintf("allow-always: nothing to persist for this command (%s); ran once.", why)
	}
	return persisted, note
}

// scriptInterpreters run a script file given as their first operand; the
// file is bound to an approval like the executables.
var scriptInterpreters = regexp.MustCompile(`^(node|perl|php|python[0-9.]*|ruby|bun|deno|sh|bash|zsh)$`)

// scriptOperand returns the script file of a single-segment command run by
// an interpreter, with its digest, or nil.
func scriptOperand(d policy.Decision, cwd string) *approvals.FileDigest {
	var segs []policy.Segment
	walkSegments(d.Analysis.Parts, func(s policy.Segment) { segs = append(segs, s) })
	for _, s := range segs {
		if s.Exe == "" || !scriptInterpreters.MatchString(filepath.Base(s.Exe)) {
			continue
		}
		start := 1
		for i, a := range s.Argv {
			if filepath.Base(a) == filepath.Base(s.Exe) {
				start = i + 1
				break
			}
		}
		for _, a := range s.Argv[min(start, len(s.Argv)):] {
			if strings.HasPrefix(a, "-") {
				if a == "-c" || a == "-e" || a == "-m" {
					break
				}
				continue
			}
			p := a
			if !filepath.IsAbs(p) {
				p = filepath.Join(cwd, p)
			}
			if real, err := filepath.EvalSymlinks(p); err == nil {
				if sum := fileSHA256(real); sum != "" {
					return &approvals.FileDigest{Path: real, SHA256: sum}
				}
			}
			break
		}
	}
	return nil
}

// planUnchanged re-resolves what was approved: every executable's content,
// the script operand's content and the working directory's identity.
func planUnchanged(req *approvals.Request) bool {
	if req.Script != nil && hashFile(req.Script.Path) != req.Script.SHA256 {
		return false
	}
	for _, seg := range req.Segments {
		if seg.RealPath != "" && seg.SHA256 != "" && hashFile(seg.RealPath) != seg.SHA256 {
			return false
		}
	}
	if req.CwdIdentity != nil {
		cur := dirIdentity(req.Cwd)
		if cur == nil || *cur != *req.CwdIdentity {
			return false
		}
	}
	return true
}

// resolvesAsApproved resolves the command again, as its run is about to:
// every segment must name the same executable with the same realpath, and
// the script operand must be the same file. An approved command runs as
// written, so a word that is a symlink (./tool, a script, a name in a PATH
// directory the agent can write) retargeted after the request would run
// another file, while the approved realpaths still hash the same.
func resolvesAsApproved(req *approvals.Request, pr *pendingRun) bool {
	d := policy.Evaluate(pr.gate.eff.Request)
	return sameResolution(resolution(d), req.Segments) && sameScript(scriptOperand(d, pr.plan.Cwd), req.Script)
}

// resolution lists what each segment of a decision resolved to.
func resolution(d policy.Decision) []approvals.Segment {
	var out []approvals.Segment
	walkSegments(d.Analysis.Parts, func(s policy.Segment) {
		out = append(out, approvals.Segment{Exe: s.Exe, RealPath: s.RealPath})
	})
	return out
}

// sameResolution reports whether two resolutions name the same paths and
// realpaths, segment by segment.
func sameResolution(now, then []approvals.Segment) bool {
	if len(now) != len(then) {
		return false
	}
	for i := range then {
		if now[i].Exe != then[i].Exe || now[i].RealPath != then[i].RealPath {
			return false
		}
	}
	return true
}

func sameScript(now, then *approvals.FileDigest) bool {
	if now == nil || then == nil {
		return now == then
	}
	return now.Path == then.Path && now.SHA256 == then.SHA256
}

// finishedNotice is the event of an approval-gated run's end: "Exec
// finished (gateway id=<approvalId>, session=<id>, code <N>|timeout)" and
// the snippet.
func (e *Engine) finishedNotice(s *session, ex proto.Exit) {
	s.mu.Lock()
	aid := s.approvalID
	agentEnded := s.st.AgentEnded
	s.mu.Unlock()
	if aid == "" || ex.State == proto.StateDenied || agentEnded {
		return
	}
	end := "code " + func() string {
		if ex.ExitCode != nil {
			return fmt.Sprint(*ex.ExitCode)
		}
		return "null"
	}()
	if ex.TimedOut {
		end = "timeout"
	}
	text := fmt.Sprintf("Exec finished (%s id=%s, session=%s, %s)", noticeHost(s), aid, s.id, end)
	tail, _ := e.tail(s, 400)
	if sn := render.Snippet(tail); sn != "" {
		text += "\n" + sn
	}
	e.queueNotice(s, apitype.Notice{Kind: "finished", SessionID: s.id, ApprovalID: aid, Text: text})
}

// withdraw resolves a pending approval as denied by the agent (process
// remove).
func (e *Engine) withdraw(s *session) {
	if !s.claim() {
		// A decision won the race and the run is starting: remove it like
		// a running session once it has a supervisor.
		s.update(func(st *state) { st.Hidden = true; st.AgentEnded = true })
		deadline := time.Now().Add(10 * time.Second)
		for s.running() && !s.started() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if s.running() {
			e.killSession(s, proto.KilledByAgent)
		}
		return
	}
	s.mu.Lock()
	req := s.approval
	s.mu.Unlock()
	if req != nil {
		e.store.Decide(req.ID, approvals.Deny, "agent")
	}
	s.update(func(st *state) { st.Hidden = true; st.AgentEnded = true })
	e.deny(s, "user-denied", "withdrawn")
}

// reasonDropped is the end reason of a session whose approval can no
// longer run.
const reasonDropped = "approval-dropped"

// approvedStep marks the steps of an approved run's start, for tests
// that end the engine at each one (a variable for tests).
var approvedStep = func(step string) {}

// grantedBy says who granted an approval, for the reason of a run that
// was approved and did not start: "approved (allow-once by operator-x)".
func grantedBy(decision, by string) string {
	switch {
	case decision == "" && by == "":
		return "approved"
	case by == "" || by == "timeout":
		return fmt.Sprintf("approved (%s)", decision)
	}
	return fmt.Sprintf("approved (%s by %s)", decision, by)
}

// ledgerHasDecision reports whether the ledger holds a decision on
// approval id (an engine that died after recording one).
func (e *Engine) ledgerHasDecision(id string) bool {
	recs, _ := ledger.Tail(e.home, 0, ledger.Filter{Approval: id})
	for _, r := range recs {
		if r.Type == ledger.TypeDecision {
			return true
		}
	}
	return false
}

// lostBeforeStart ends a session found at the engine's start that was
// approved and being started by an engine that died before the run had a
// supervisor (its state names the approval; no meta.json, no output): it
// ends denied, approval-dropped with who approved it, and the ledger says
// the run was dropped. It was deleted without a word.
func (e *Engine) lostBeforeStart(s *session) {
	s.approvalID = s.st.ApprovalID
	s.start = time.UnixMilli(s.st.CreatedAt)
	decision, by := "", ""
	s.approval = &approvals.Request{ID: s.st.ApprovalID} // for the notice
	if req, err := e.store.Get(s.st.ApprovalID); err == nil {
		decision, by = string(req.Decision), req.DecidedBy
		s.approval = req
		if !e.ledgerHasDecision(req.ID) && decision != "" {
			// Its record of the decision did not reach the ledger.
			e.appendLedger(ledger.Record{Type: ledger.TypeDecision, Agent: s.agent, Fields: ledger.Decision{
				ApprovalID: req.ID, Decision: decision, DecidedBy: by, Persisted: []string{}}}, true)
		}
	}
	e.appendLedger(ledger.Record{Type: ledger.TypeDecision, Agent: s.agent, Fields: ledger.Decision{
		ApprovalID: s.st.ApprovalID, Decision: "dropped", DecidedBy: "engine", Persisted: []string{}}}, true)
	e.deny(s, reasonDropped+" ("+grantedBy(decision, by)+", but the gateway stopped before the approved run started)", "")
}

// reloadPending handles a session reserved by an approval, found at the
// engine's start. Its prepared plan (with the environment's values, which
// are never stored) died with the engine that made it, so no decision can
// make it run: the request is dropped (a decision on it then answers that
// it was dropped, and why) and the session ends denied, with a notice. A
// request decided allow before the restart but not yet run ends the same
// way.
func (e *Engine) reloadPending(s *session) {
	req, err := e.store.Get(s.st.PendingApprovalID)
	if err != nil {
		ex := proto.Exit{State: proto.StateDenied, Reason: "approval-request-failed", EndedAt: time.Now().UnixMilli(), Final: true}
		s.finish(e.recordExit(s, ex, true))
		return
	}
	s.approval = req
	s.start = time.UnixMilli(s.st.CreatedAt)
	why := "the gateway restarted while it was pending"
	if req.State == approvals.Pending {
		if d, err := e.store.Drop(req.ID, why); err == nil {
			req = d
		} else if cur, gerr := e.store.Get(req.ID); gerr == nil {
			req = cur // decided meanwhile
		}
	}
	switch req.State {
	case approvals.Denied:
		// Denied while no engine ran.
		e.appendLedger(ledger.Record{Type: ledger.TypeDecision, Agent: s.st.Agent, Fields: ledger.Decision{
			ApprovalID: req.ID, Decision: "deny", DecidedBy: req.DecidedBy, Persisted: []string{}}}, true)
		e.deny(s, "user-denied", "")
		return
	case approvals.Expired:
		e.deny(s, "approval-timeout", "")
		return
	case approvals.Dropped:
		why = req.DropReason // maybe by a decision made while no engine ran
	case approvals.Consumed, approvals.Allowed:
		// Allowed, and the engine that held the run died before it
		// started it (there is no meta.json): before it acted, or as it
		// consumed the approval, and maybe before its record of the
		// decision reached the ledger. The ledger shows who allowed it,
		// once, then that the run was dropped.
		why = grantedBy(string(req.Decision), req.DecidedBy) + ", but the gateway stopped before the approved run started"
		if !e.ledgerHasDecision(req.ID) {
			e.appendLedger(ledger.Record{Type: ledger.TypeDecision, Agent: s.st.Agent, Fields: ledger.Decision{
				ApprovalID: req.ID, Decision: string(req.Decision), DecidedBy: req.DecidedBy, Persisted: []string{}}}, true)
		}
	}
	e.appendLedger(ledger.Record{Type: ledger.TypeDecision, Agent: s.st.Agent, Fields: ledger.Decision{
		ApprovalID: req.ID, Decision: "dropped", DecidedBy: "engine", Persisted: []string{}}}, true)
	e.deny(s, reasonDropped+" ("+why+")", "")
}

var _ = strings.TrimSpace

// DecideApproval records an operator's or a human's decision on an
// approval (by id or slug). The engine's watcher acts on it.
func (e *Engine) DecideApproval(idOrSlug, decision, decidedBy string) error {
	d, err := approvals.ParseDecision(decision)
	if err != nil {
		return err
	}
	_, err = e.store.Decide(idOrSlug, d, decidedBy)
	return err
}

// Pending reports whether agent's session waits for an approval.
func (e *Engine) Pending(agent, sessionID string) bool {
	s := e.lookup(agent, sessionID)
	return s != nil && s.pending()
}

// AwaitApproved follows an approval-gated session after its decision, for
// callers that obtained the decision synchronously (MCP elicitation): a
// denial gives the error `exec denied: …`; a run is awaited for window
// like an exec yield window, then reported as completed/failed or running.
func (e *Engine) AwaitApproved(ctx context.Context, agent, sessionID string, window time.Duration) (res apitype.Result) {
	defer func() { res = e.bound(agent, res) }()
	s := e.lookup(agent, sessionID)
	if s == nil {
		return execError(apitype.Errorf(apitype.CodeNotFound, "No session found for %s", sessionID))
	}
	for s.pending() {
		select {
		case <-ctx.Done():
			return execError(apitype.Errorf("timeout", "approval still pending for %s", sessionID))
		case <-s.changed():
		case <-time.After(50 * time.Millisecond):
		}
	}
	t := time.NewTimer(window)
	defer t.Stop()
	select {
	case <-s.ended:
	case <-t.C:
	case <-ctx.Done():
	}
	st, ex, _ := s.snapshot()
	if ex != nil && ex.State == proto.StateDenied {
		reason := ex.Reason
		if reason == "user-denied" {
			reason = "user denied"
		}
		return execError(apitype.Errorf("denied", "exec denied: %s", reason))
	}
	set := e.conf().Exec(agent)
	if ex != nil {
		out := e.output(s, set.MaxOutputChars)
		s.update(func(st *state) { st.ObservedEnd = true; st.Retained = true })
		res := endResult(s, *ex, out, set)
		res.Details.(*apitype.ExecDetails).Host = st.Host
		return res
	}
	return e.runningResult(s)
}
