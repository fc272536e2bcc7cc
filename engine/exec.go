package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/store/ledger"
)

// Exec runs the exec tool for agent (docs/tools.md). The result is never a Go
// error: failures are results with status "error" or "failed".
func (e *Engine) Exec(ctx context.Context, agent string, p apitype.ExecParams) (res apitype.Result) {
	start := time.Now()
	ctx, span := startExecSpan(ctx, agent, p)
	defer func() { endExecSpan(span, res) }()
	if p.IdempotencyKey != "" {
		res = e.idempotent(ctx, agent, p, func() apitype.Result { return e.exec(ctx, agent, p) })
	} else {
		res = e.exec(ctx, agent, p)
	}
	res = withNotes(res, p.Notes)
	e.countExec(agent, res, time.Since(start))
	if isOperator(ctx) {
		return res
	}
	return e.withNotices(agent, res)
}

func execError(err *apitype.Error) apitype.Result {
	return apitype.Result{Text: err.Message, Details: &apitype.ErrorDetails{Status: "error", Error: err}}
}

// plan is a validated exec request, ready to spawn (internal/host).
type plan = host.Plan

func (e *Engine) exec(ctx context.Context, agent string, p apitype.ExecParams) apitype.Result {
	if e.isClosed() {
		return execError(apitype.Errorf(apitype.CodeUnavailable, stoppingText))
	}
	// A full or unwritable home refuses at once, before the plan (which
	// may wait for the login-shell PATH).
	if derr := e.homeRefusal(); derr != nil {
		return execError(derr)
	}
	pl, aerr := e.plan(ctx, agent, p, workdirFrom(ctx))
	if aerr != nil {
		return execError(aerr)
	}
	pl.Trace = trace.SpanContextFromContext(ctx)
	release, qerr := e.admit(agent)
	defer release()
	if qerr != nil {
		return execError(qerr)
	}
	// The script preflight reads files: only where they are (not for a
	// node, whose files the gateway cannot see).
	if msg := preflight(pl.Command, pl.Cwd); pl.Node == nil && msg != "" {
		return execError(apitype.Errorf("preflight", "%s", msg))
	}
	var g gateResult
	gateStart := time.Now()
	switch pl.Gate {
	case host.GatePolicy:
		// Host execution passes the policy gate; the implicit-sandbox
		// fallback does not.
		g = e.gate(agent, p, pl)
		tracePolicy(ctx, gateStart, g)
		if !g.run {
			return g.result
		}
	case host.GateNode:
		g = e.nodeGate(ctx, agent, p, pl)
		tracePolicy(ctx, gateStart, g)
		if !g.run {
			return g.result
		}
	default:
		g.requestID = newUUID()
	}
	s, res, ok := e.spawn(pl, p, g)
	release() // registered (or failed): it counts as running from here
	if !ok {
		return res
	}
	traceSession(ctx, s.id)
	if pl.Window == 0 {
		return e.background(s, pl)
	}
	var timer <-chan time.Time
	if pl.Window > 0 {
		// The wait for the login PATH counted against the window.
		t := time.NewTimer(max(pl.Window-pl.LoginWait, time.Millisecond))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-s.ended:
		return e.foregroundResult(s, pl)
	case <-timer:
		return e.background(s, pl)
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), ErrStopping) {
			// conch is stopping, not the caller giving up: the run
			// keeps going as a background session, and the caller gets
			// its id before the transport closes.
			return e.background(s, pl)
		}
		// The caller gave up during the yield window: the run goes too.
		s.update(func(st *state) { st.AgentEnded = true })
		if !e.killSession(s, proto.KilledByAgent) {
			// Not delivered (its supervisor is stopped or gone): the
			// caller is gone, nothing to wait for.
			return e.background(s, pl)
		}
		select {
		case <-s.ended:
			return e.foregroundResult(s, pl)
		case <-time.After(pl.Set.KillGrace + 3*time.Second):
			// Still ending: leave it to the supervisor; the caller is
			// gone anyway.
			return e.background(s, pl)
		}
	}
}

// plan takes an exec call through its planning steps (background allowed,
// elevated, host, security and ask, node, workdir, environment) and sets
// the effective timeout: it chooses the host, sets
// what does not depend on it, and has the host plan the rest. ctx is the
// caller's: a caller that gives up stops the planning (a docker create,
// say); conch stopping does not (the run then goes on in the
// background, as a started one would).
func (e *Engine) plan(ctx context.Context, agent string, p apitype.ExecParams, workspace string) (*plan, *apitype.Error) {
	ctx, cancel := callerContext(ctx)
	defer cancel()
	set := e.conf().Exec(agent)
	pl := &plan{Agent: agent, Command: p.Command, Set: set}

	// Host.
	configured, _ := e.configuredHost(agent)
	sb := e.conf().SandboxFor(agent)
	var backend sandbox.Backend
	var sbErr error
	sbHost := host.SandboxHost(sb.Backend) // "sandbox", or the host of a backend whose sandboxes live elsewhere
	if sb.On && (configured == "" || configured == "sandbox") && sbHost == "sandbox" {
		backend, sbErr = sandbox.For(ctx, sb)
	}
	// Elevated: only with sandboxing on; it forces the
	// gateway host.
	level := ""
	if sb.On {
		var aerr *apitype.Error
		if level, aerr = e.elevatedLevel(agent, p.Elevated); aerr != nil {
			return nil, aerr
		}
	}
	name, reason, aerr := host.Choose(host.Choice{Configured: configured, Requested: p.Host, Elevated: level, SandboxOn: sb.On, SandboxErr: sbErr})
	if aerr != nil {
		if sbErr != nil && aerr.Code == apitype.CodeSandboxUnavail {
			e.log.Warn("sandbox unavailable", "agent", agent, "err", sbErr)
		}
		return nil, aerr
	}
	runsOn := name
	if name == "sandbox" {
		runsOn = sbHost
	}
	h, ok := e.hosts.Lookup(runsOn)
	if !ok {
		return nil, apitype.Errorf(apitype.CodeHostNotAllowed, "exec host %s is not available in this build.", name)
	}
	pl.Host, pl.HostReason, pl.Runner = name, reason, runsOn

	// Background allowed? An agent denied the process tool cannot follow a
	// backgrounded run up, so it runs synchronously with a warning.
	pl.Window = set.Yield
	background := p.Background != nil && *p.Background
	switch {
	case set.DenyProcess && (p.Background != nil || p.YieldMs != nil):
		pl.Warnings = append(pl.Warnings, "Warning: background execution is disabled; running synchronously.")
		pl.Window = -1
		background = false
	case set.DenyProcess:
		pl.Window = -1
	case background:
		pl.Window = 0
	case p.YieldMs != nil:
		ms := *p.YieldMs
		if ms < 10 {
			ms = 10
		}
		pl.Window = time.Duration(math.Min(ms, 120000)) * time.Millisecond
	}

	// Timeout.
	switch {
	case p.Timeout != nil:
		pl.Timeout = secondsDuration(*p.Timeout)
	case background || (p.YieldMs != nil && !set.DenyProcess):
		pl.Timeout = set.BackgroundTimeout
	default:
		pl.Timeout = set.Timeout
	}

	pl.PTY = set.PTY
	if p.PTY != nil {
		pl.PTY = *p.PTY
	}
	switch {
	case pl.PTY:
		pl.Stdin = "pty"
	case background:
		pl.Stdin = "open"
	default:
		pl.Stdin = "closed"
	}

	// Workdir, environment, argv: the host's.
	req := host.Request{Params: p, Workspace: e.defaultWorkspace(agent, set, workspace), Sandbox: sb, Backend: backend}
	if aerr := h.Plan(ctx, req, pl); aerr != nil {
		return nil, aerr
	}
	return pl, nil
}

// callerContext is ctx without the cancellation of conch stopping
// (ErrStopping): only the caller giving up ends it.
func callerContext(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if cause := context.Cause(ctx); !errors.Is(cause, ErrStopping) {
			cancel(cause)
		}
	})
	return c, func() { stop(); cancel(nil) }
}

// defaultWorkspace is an agent's default workspace: configured, else the
// caller's (conch mcp --workdir), else the agents file's, else the
// engine's directory.
func (e *Engine) defaultWorkspace(agent string, set config.ExecSettings, workspace string) string {
	def := set.Workspace
	if def == "" {
		def = workspace
	}
	if def == "" && e.opt.Workspace != nil {
		def = e.opt.Workspace(agent)
	}
	if def == "" {
		def = e.cwd
	}
	return def
}

func secondsDuration(s float64) time.Duration {
	if s <= 0 || math.IsNaN(s) {
		return 0
	}
	if s > 1e9 {
		s = 1e9
	}
	return time.Duration(int64(s*1000)) * time.Millisecond
}

// expandTilde and prependPath are the host layer's (internal/host).
var (
	expandTilde = host.ExpandTilde
	prependPath = host.PrependPath
)

// spawn creates the session and starts its supervisor. On failure it
// returns the result to give the caller and ok=false; nothing remains.
func (e *Engine) spawn(pl *plan, p apitype.ExecParams, g gateResult) (*session, apitype.Result, bool) {
	id, dir, err := e.newID()
	if err != nil {
		return nil, e.homeWriteError(err), false
	}
	s := e.newSession(id, dir, pl.Agent)
	s.st = state{
		Agent: pl.Agent, Command: pl.Command, Name: deriveName(pl.Command), Cwd: pl.Cwd, Host: pl.Host,
		PTY: pl.PTY, CreatedAt: time.Now().UnixMilli(), TimeoutSec: pl.Timeout.Seconds(),
		Gated: pl.Gate == host.GatePolicy, NodeID: nodeIDOf(pl),
	}
	// A local supervisor writes state.json from the spec (a host only if
	// the session outlives the call; see proto.Spec.State).
	if pl.Node != nil {
		err = s.createState()
	}
	if err != nil {
		e.removeSession(s)
		return nil, e.homeWriteError(err), false
	}
	err = e.launch(s, pl, p, g.requestID, "", g.pinned)
	if err != nil && errors.Is(err, host.ErrSessionIDInUse) {
		// The node still keeps a session of that name: once more with a
		// fresh id.
		e.removeSession(s)
		if id, dir, err = e.newID(); err != nil {
			return nil, e.homeWriteError(err), false
		}
		st := s.st
		s = e.newSession(id, dir, pl.Agent)
		s.st = st
		if err = s.saveLocked(); err == nil {
			err = e.launch(s, pl, p, g.requestID, "", g.pinned)
		}
	}
	if err != nil {
		e.noteWrite(err)
		// A supervisor killed for not reporting in time may have started
		// the command already: end its tree before forgetting it.
		var meta proto.Meta
		if fsutil.ReadJSON(proto.MetaPath(s.dir), &meta) == nil {
			supervisor.Sweep(meta)
		} else if pl.Node == nil {
			supervisor.SweepSession(s.id) // a host that died before writing it
		}
		e.removeSession(s)
		if d := e.DiskStatus(); d.Refusing() {
			return nil, execError(refusalError(d.Code, err.Error())), false
		}
		if errors.Is(err, supervisor.ErrReportTimeout) {
			// A start that did not happen: its supervisor will not run
			// it later (proto.Spec.StartBy).
			return nil, execError(apitype.Errorf(apitype.CodeUnavailable, "The command was not started: %v. Try again.", err)), false
		}
		if supervisor.IsResourceExhausted(err) {
			return nil, execError(apitype.Errorf(apitype.CodeResourceExhausted,
				"Out of file descriptors: the command was not started (%v). Running sessions go on. Free descriptors (end sessions you no longer need) or raise the limit (ulimit -n; LimitNOFILE= in a systemd unit), then try again.", err)), false
		}
		msg := err.Error()
		return nil, apitype.Result{
			Text: withWarnings(pl.Warnings, msg),
			Details: &apitype.ExecDetails{
				Status: "failed", Reason: msg, Cwd: pl.Cwd, Host: pl.Host, HostReason: pl.HostReason, Warnings: pl.Warnings,
			},
		}, false
	}
	return s, apitype.Result{}, true
}

// homeWriteError is the result of a session record that could not be
// written: disk_full or home_unwritable (writeClass), else io_error.
func (e *Engine) homeWriteError(err error) apitype.Result {
	e.noteWrite(err)
	if code := writeClass(err); code != "" {
		return execError(refusalError(code, err.Error()))
	}
	return execError(apitype.Errorf(apitype.CodeIOError, "conch home %s is not writable (%v)", e.home, err))
}

// launch starts the supervisor of an existing session record, registers
// the session and records the run in the ledger.
func (e *Engine) launch(s *session, pl *plan, p apitype.ExecParams, requestID, approvalID string, pinned bool) error {
	id, dir := s.id, s.dir
	spec := proto.Spec{
		ID: id, Agent: pl.Agent, Name: deriveName(pl.Command), Command: pl.Command, Argv: pl.Argv,
		Env: append(pl.Env, "CONCH_SESSION_ID="+id), Dir: pl.Cwd, Host: pl.Host, HostReason: pl.HostReason,
		PTY: pl.PTY, Cols: 120, Rows: 30, Stdin: pl.Stdin, TimeoutMs: pl.Timeout.Milliseconds(),
		KillGraceMs: pl.Set.KillGrace.Milliseconds(), JournalMaxBytes: pl.Set.JournalMaxBytes,
		JournalHeadBytes: headBytes(pl.Set.JournalHeadBytes), Socket: e.socketPath(id), EnvKeys: pl.EnvKeys,
		Fingerprint: fingerprint(p), IdempotencyKey: p.IdempotencyKey, Sandbox: pl.Sandbox,
	}
	if pl.Node == nil {
		s.mu.Lock()
		spec.State, _ = json.Marshal(s.st)
		s.mu.Unlock()
	}
	spec.Limits = e.sessionLimits(pl)
	h, err := e.start(spec, pl, requestID, approvalID)
	if err != nil && pl.PTY && errors.Is(err, supervisor.ErrOpenPTY) {
		pl.Warnings = append(pl.Warnings, fmt.Sprintf("Warning: PTY spawn failed (%v); retrying without PTY for `%s`.", err, pl.Command))
		pl.PTY, pl.Stdin = false, "open"
		spec.PTY, spec.Stdin = false, "open"
		s.update(func(st *state) { st.PTY = false })
		h, err = e.start(spec, pl, requestID, approvalID)
	}
	if err != nil {
		return err
	}
	pl.Warnings = append(pl.Warnings, h.Warnings...)
	e.appendLedgerThen(ledger.Record{Type: ledger.TypeExec, Agent: pl.Agent, Fields: ledger.Exec{
		RequestID: requestID, ApprovalID: approvalID, SessionID: id, Host: pl.Host, HostReason: pl.HostReason,
		Argv: pl.Argv, Pinned: pinned, Cwd: pl.Cwd, Exe: ledger.ExeDigest{Path: pl.Argv[0], SHA256: fileSHA256(pl.Argv[0])},
		EnvHash: pl.EnvHash, PTY: pl.PTY, TimeoutMs: pl.Timeout.Milliseconds(),
	}}, approvalID != "" || pl.HostReason == "", func() { s.markLedger(func(st *state) { st.LedgerExec = true }) })
	socket := spec.Socket
	if h.Socket != "" {
		socket = h.Socket // its host's
	}
	s.mu.Lock()
	s.pid, s.socket, s.start = h.PID, socket, time.Now()
	s.release = h.Release
	s.guard = pl.Guard
	if h.Meta != nil {
		s.meta = *h.Meta
		s.start = time.UnixMilli(s.meta.StartedAt)
	} else {
		s.meta = proto.Meta{ID: id, Agent: pl.Agent, PID: h.PID, PGID: h.PID, Socket: socket,
			SupervisorPID: h.SupervisorPID, SupervisorStartTime: supervisor.StartTime(h.SupervisorPID),
			StartedAt: s.start.UnixMilli(), Cwd: pl.Cwd, Stdin: pl.Stdin}
		if err := fsutil.ReadJSON(proto.MetaPath(dir), &s.meta); err != nil {
			e.log.Warn("read meta.json", "session", id, "err", err)
		} else {
			s.start = time.UnixMilli(s.meta.StartedAt)
		}
	}
	if pl.SbInfo != nil && s.meta.Sandbox != nil {
		pl.SbInfo.Limits = s.meta.Sandbox.Limits
	}
	s.mu.Unlock()
	e.sessions.Put(id, s)
	e.emit("session.started", s.agent, map[string]any{"sessionId": id, "agent": s.agent, "name": spec.Name,
		"host": pl.Host, "pty": pl.PTY, "startedAt": s.start.UnixMilli()})
	e.wg.Add(1)
	go e.track(s, h.Events, h.Close)
	e.traceRun(s, pl.Trace)
	return nil
}

// start starts spec on its host (a local supervisor for the gateway and
// the sandbox, the node hub for a gateway's host=node run).
func (e *Engine) start(spec proto.Spec, pl *plan, requestID, approvalID string) (*proto.Handle, error) {
	// The start is bounded by what is left of the caller's yield window.
	ctx := context.Background()
	if d := startBound(pl, approvalID); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if pl.Local {
		return e.commit(ctx, spec)
	}
	// The host that planned the run starts it: a kubernetes sandbox run
	// reports host sandbox, but only the pod host may start it (the
	// sandbox host would start it here, on the gateway, unsandboxed).
	h, ok := e.hosts.Lookup(pl.Runner)
	if !ok {
		return nil, fmt.Errorf("exec host %s is not available in this build", pl.Runner)
	}
	return h.Start(ctx, pl, spec, host.Run{RequestID: requestID, ApprovalID: approvalID})
}

func nodeIDOf(pl *plan) string {
	if pl.Node == nil {
		return ""
	}
	return pl.Node.Ref.ID
}

// commit starts spec under a supervisor from the engine's pool: in the
// current shared supervisor when sessions share them, else in the warm
// spare, else in a new process; it waits for the start report no longer
// than ctx's deadline allows (supervisor.Pool.StartWithin).
func (e *Engine) commit(ctx context.Context, spec proto.Spec) (*proto.Handle, error) {
	if dl, ok := ctx.Deadline(); ok {
		return e.pool.StartWithin(spec, max(time.Until(dl), time.Millisecond))
	}
	return e.pool.Start(spec)
}

// startBound is how long an exec call waits for its supervisor's start
// report (supervisor.Pool.StartWithin): what is left of its yield window,
// so that a call answers within it (and a small bound) even when the
// shared supervisor is stopped or wedged; 0 (the pool's own bound) for a run
// nobody waits on (an approved run) or a call without a window.
func startBound(pl *plan, approvalID string) time.Duration {
	if approvalID != "" || pl.Window < 0 {
		return 0
	}
	return max(pl.Window-pl.LoginWait, time.Millisecond)
}

// sharedGone is called by the pool once h has exited: it writes the end
// state the engine has of any of its sessions whose exit.json the host
// did not write (a host writes it late, and one that crashed meanwhile
// would leave the next engine start to find the session lost).
func (e *Engine) sharedGone(h *supervisor.Shared) {
	<-h.Exited()
	pid := h.PID()
	ended := e.sessions.Select(nil)
	for _, s := range ended {
		s.mu.Lock()
		mine := s.meta.SupervisorPID == pid
		ex := s.exit
		s.mu.Unlock()
		if !mine || ex == nil || !ex.Final {
			continue
		}
		if _, ok, _ := e.readExit(s.dir); ok {
			continue
		}
		if _, err := os.Stat(s.dir); err != nil {
			continue // removed
		}
		if err := proto.WriteExit(s.dir, *ex); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.writeFailed("exit", s.id, err)
			s.mu.Lock()
			s.exit.NotRecorded = err.Error()
			s.mu.Unlock()
		}
	}
}

// supervisorEnv is the environment of a supervisor process: nothing from
// the engine's own environment leaks into it (the command's environment
// travels in the spec).
func supervisorEnv() []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, k := range []string{"GOCOVERDIR", "GOTRACEBACK", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, "GOGC=50", "GOMAXPROCS=2")
}

// fingerprint hashes the request fields that define a run.
func fingerprint(p apitype.ExecParams) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q|%q|%q|%q|", p.Command, p.Workdir, p.Host, p.Node)
	keys := make([]string, 0, len(p.Env))
	for k := range p.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%q=%q,", k, p.Env[k])
	}
	for _, v := range []*bool{p.PTY, p.Background, p.Elevated} {
		if v == nil {
			b.WriteString("-|")
		} else {
			b.WriteString(strconv.FormatBool(*v) + "|")
		}
	}
	fmt.Fprintf(&b, "%q|%q", p.Security, p.Ask)
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// headBytes maps the configured head size to the journal option, where 0
// means "default" and a negative value "no head".
func headBytes(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

func withWarnings(warnings []string, text string) string {
	if len(warnings) == 0 {
		return text
	}
	return strings.Join(warnings, "\n") + "\n\n" + text
}

// background marks s as a background session and returns the running
// result.
func (e *Engine) background(s *session, pl *plan) apitype.Result {
	s.update(func(st *state) { st.Backgrounded = true })
	e.emit("session.backgrounded", s.agent, map[string]any{"sessionId": s.id, "agent": s.agent, "name": deriveName(pl.Command),
		"host": pl.Host, "pty": pl.PTY, "startedAt": s.start.UnixMilli()})
	if !s.running() {
		// It ended between the timer and the mark: the notice, and the
		// retention check, are ours.
		_, ex, _ := s.snapshot()
		e.queueExitNotice(s, *ex)
		e.retainLater(s.agent)
	}
	tail, cursor, screen := e.viewTail(s, 2000)
	pid := s.pid
	st, _, _ := s.snapshot()
	d := &apitype.ExecDetails{
		Status: "running", SessionID: s.id, PID: &pid, StartedAt: s.start.UnixMilli(), Cwd: pl.Cwd,
		Tail: &tail, Cursor: cursor, Name: st.Name, PTY: &pl.PTY, Host: pl.Host, HostReason: pl.HostReason,
		Stdin: pl.Stdin, Warnings: pl.Warnings, Sandbox: pl.SbInfo, NodeID: nodeIDOf(pl),
	}
	text := runningText(s.id, pid, pl.Stdin, tail, screen)
	return apitype.Result{Text: withWarnings(pl.Warnings, text), Details: d}
}

// foregroundResult builds the completed/failed result of a run that ended
// in its yield window, and deletes the session unless its output was
// truncated (then it is retained so the agent can page it).
func (e *Engine) foregroundResult(s *session, pl *plan) apitype.Result {
	_, ex, _ := s.snapshot()
	// A local supervisor's journal that counted no output byte has
	// nothing to read.
	var out outputText
	if pl.Node != nil || ex.OutputBytes > 0 {
		out = e.output(s, pl.Set.MaxOutputChars)
	}
	// Output a full disk kept out of the journal makes the result
	// truncated too: the session is kept like any truncated one.
	out.truncated = out.truncated || ex.UnrecordedBytes > 0
	if out.truncated {
		// Kept after its end: the retention check is ours.
		s.update(func(st *state) { st.Retained = true })
		e.retainLater(s.agent)
	} else {
		// Nobody can name this session any more: delete it off the
		// caller's path.
		e.forget(s)
		e.wg.Add(1)
		go func() { defer e.wg.Done(); e.removeSession(s) }()
	}
	res := endResult(s, *ex, out, pl.Set)
	d := res.Details.(*apitype.ExecDetails)
	d.Host, d.HostReason, d.Warnings, d.Sandbox, d.NodeID = pl.Host, pl.HostReason, pl.Warnings, pl.SbInfo, nodeIDOf(pl)
	if !out.truncated {
		d.SessionID = ""
	}
	res.Text = withWarnings(pl.Warnings, res.Text)
	return res
}

// endResult turns an end state and the rendered output into the exec
// result: completed (exited by itself, not 126 or 127) or failed.
func endResult(s *session, ex proto.Exit, out outputText, set config.ExecSettings) apitype.Result {
	st, _, _ := s.snapshot()
	dur := ex.DurationMs
	trunc := out.truncated || ex.DroppedBytes > 0 || ex.UnrecordedBytes > 0
	bytes := ex.OutputBytes
	desc := ex.DescendantsKilled
	agg := out.text
	d := &apitype.ExecDetails{
		State: ex.State, ExitCode: ex.ExitCode, Signal: ex.Signal, KilledBy: ex.KilledBy,
		DurationMs: &dur, Aggregated: &agg, Cwd: st.Cwd, SessionID: s.id, Truncated: &trunc,
		OutputBytes: &bytes, Cursor: out.cursor, DescendantsKilled: &desc,
		DroppedBytes: ex.DroppedBytes, UnrecordedBytes: ex.UnrecordedBytes,
		UnreadableBytes: out.unreadable,
	}
	lost := lostNote(ex)
	if st.Restored != "" {
		lost += "\n\n" + st.Restored
	}
	reason := failureReason(ex, st.TimeoutSec)
	if reason == "" {
		d.Status = "completed"
		text := out.text
		if strings.TrimSpace(text) == "" {
			text = "(no output)"
		}
		if ex.ExitCode != nil && *ex.ExitCode != 0 {
			text += fmt.Sprintf("\n\n(Command exited with code %d)", *ex.ExitCode)
		}
		if n := leftoverNote(ex, st.Backgrounded); n != "" {
			text += "\n\n" + n
		}
		return apitype.Result{Text: text + lost, Details: d}
	}
	d.Status = "failed"
	d.Reason = reason
	to := ex.TimedOut
	d.TimedOut = &to
	text := reason
	if strings.TrimSpace(out.text) != "" {
		text = out.text + "\n\n" + reason
	}
	if n := leftoverNote(ex, st.Backgrounded); n != "" {
		text += "\n\n" + n
	}
	return apitype.Result{Text: text + lost, Details: d}
}

// leftoverNote says in words what descendantsKilled says in the details
// when a command ended by itself: the processes it left running (a server
// started with &, a daemon) were stopped when it ended. "" when there were
// none, or when the command itself was killed (its whole tree goes then,
// by request). backgrounded picks the advice: a foreground run should use
// background:true, a background session lasts only as long as its command.
func leftoverNote(ex proto.Exit, backgrounded bool) string {
	n := ex.DescendantsKilled
	if n <= 0 || ex.State != proto.StateExited && ex.State != proto.StateSignaled {
		return ""
	}
	what := "1 background process started by this command was stopped when it ended"
	if n > 1 {
		what = fmt.Sprintf("%d background processes started by this command were stopped when it ended", n)
	}
	if backgrounded {
		return what + "; a session lasts as long as its command: run the server in the foreground of the command (without &) to keep it running."
	}
	return what + "; use background:true to keep a server running."
}

// failureReason returns the reason text of a failed run (not found, not
// executable, timed out, killed, signaled, lost), or "" for a run
// that completed (exited by itself with a code other than 126 and 127).
func failureReason(ex proto.Exit, timeoutSec float64) string {
	switch ex.State {
	case proto.StateExited:
		switch *ex.ExitCode {
		case 127:
			return "Command not found"
		case 126:
			return "Command not executable (permission denied)"
		}
		return ""
	case proto.StateKilled:
		if ex.TimedOut {
			return fmt.Sprintf("Command timed out after %s seconds. If this command is expected to take longer, re-run with a higher timeout (e.g., exec timeout=300).", strconv.FormatFloat(timeoutSec, 'f', -1, 64))
		}
		if deref(ex.KilledBy) == string(proto.KilledByOOM) && ex.Reason != "" {
			return ex.Reason // out of memory, with the limit
		}
		sig := "SIGTERM"
		if ex.Signal != nil {
			sig = *ex.Signal
		}
		return fmt.Sprintf("Command killed by %s (signal %s)", deref(ex.KilledBy), sig)
	case proto.StateSignaled:
		return fmt.Sprintf("Command aborted by signal %s", deref(ex.Signal))
	case proto.StateLost:
		if ex.Reason != "" {
			return ex.Reason // a node session's: what the gateway knows of its loss
		}
		return "Command lost: its supervisor ended without recording an exit status."
	}
	if ex.Reason != "" {
		return ex.Reason
	}
	return "Command ended in state " + ex.State
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// killSession asks a session's supervisor to run the kill sequence. It
// reports whether the request reached a supervisor.
func (e *Engine) killSession(s *session, by proto.KilledBy) bool {
	return e.requestKill(s, by) == nil
}

// requestKill is killSession with the error: one wrapping
// supervisor.ErrNotResponding when the supervisor is stopped or wedged
// (the kill was not delivered), supervisor.ErrUnreachable when it is gone.
func (e *Engine) requestKill(s *session, by proto.KilledBy) error {
	_, err := supervisor.Call(s.socket, proto.Request{Op: "kill", Session: s.id, By: string(by)})
	return err
}

// killAll asks the supervisors of sessions to kill them, several at
// once: a supervisor that does not answer costs its bound (supervisor.Call)
// once, not once per session. A kill that failed otherwise (a gateway at
// its descriptor limit cannot open that many sockets at once) is asked
// again, one at a time, as sessions that end free their descriptors.
func (e *Engine) killAll(sessions []*session, by proto.KilledBy) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var again []*session
	slots := make(chan struct{}, killParallel)
	for _, s := range sessions {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := e.requestKill(s, by); err != nil && !errors.Is(err, supervisor.ErrNotResponding) {
				mu.Lock()
				again = append(again, s)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, s := range again {
		if s.running() {
			e.requestKill(s, by)
		}
	}
}

// killParallel is how many kills killAll has in flight.
const killParallel = 8

type workdirKey struct{}

// WithWorkdir returns a context whose exec calls default to dir when the
// agent has no configured workspace: a proxied `conch mcp --workdir`.
func WithWorkdir(ctx context.Context, dir string) context.Context {
	return context.WithValue(ctx, workdirKey{}, dir)
}

func workdirFrom(ctx context.Context) string {
	s, _ := ctx.Value(workdirKey{}).(string)
	return s
}

// sessionLimits are the resource limits (quotas.session) of a session
// that runs on this machine under its supervisor's cgroups: the gateway
// and the bwrap and landlock sandboxes. A docker sandbox's processes are
// in the container (its limits are the container's), and a node's
// session runs on the node.
func (e *Engine) sessionLimits(pl *plan) *proto.Limits {
	if pl.Node != nil || pl.Sandbox != nil && len(pl.Sandbox.KillArgv) > 0 {
		return nil
	}
	l := e.conf().Quota(pl.Agent).Session
	if l.MemoryBytes == 0 && l.Pids == 0 && l.CPUWeight == 0 {
		return nil
	}
	return &proto.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUWeight: l.CPUWeight}
}
