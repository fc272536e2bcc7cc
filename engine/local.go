package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/node/port"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/policy"
)

// The node side of node hosts: what the engine of a node does for its
// node host (internal/node/agent), which answers the gateway's requests.
// The engine judges a command under this home's policy (JudgeLocal),
// reserves a session id and starts a checked run as a session of this
// home (ReserveLocal, StartLocal), and persists allow-always
// (PersistAllow); the requests' checks, the prepared plans and the
// protocol's error codes are the node host's.

// JudgeLocal judges command (its argv as planned, its text raw) for
// agent in cwd ("" or relative to ~: this home's user, as on the
// gateway; "": the agent's workspace, else the engine's directory) under
// this home's policy, with the gateway's security and ask applied. A cwd
// that is not an existing directory is port.ErrNoCwd.
func (e *Engine) JudgeLocal(agent, security, ask, raw, cwd string) (port.Judgement, error) {
	var j port.Judgement
	set := e.conf().Exec(agent)
	cwd, _ = expandTilde(cwd)
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
		return j, port.ErrNoCwd
	}
	dev, ino, ok := fsutil.Identity(canon)
	if !ok {
		return j, port.ErrNoCwd
	}
	j.Cwd, j.CwdIdentity = canon, [2]uint64{dev, ino}
	env := e.nodeEnv(set, nil, false)
	eff := e.EffectivePolicy(agent, security, ask, raw, canon, envValue(env, "PATH"))
	if eff.FileErr != nil {
		j.FileErr = eff.FileErr
		return j, nil
	}
	// own is this node's policy alone, without the gateway's settings:
	// a denial says which of the two layers denied.
	own := e.EffectivePolicy(agent, "", "", raw, canon, envValue(env, "PATH"))
	j.Own = fmt.Sprintf("security=%s ask=%s (%s)", own.Security, own.Ask, own.SecuritySources)
	j.OwnSecurityDeny = own.Security == policy.SecurityDeny
	if eff.Security == policy.SecurityDeny {
		j.SecurityDeny = true
		return j, nil
	}
	// The plan is prepared before the run says whether it has a PTY:
	// judge it as if it had one (nohup then writes nohup.out).
	eff.Request.Terminal = true
	own.Request.Terminal = true
	d := policy.Evaluate(eff.Request)
	j.Allowlist = eff.Security == policy.SecurityAllowlist
	j.Outcome, j.Reason, j.Pinned, j.Persist = string(d.Outcome), d.Reason, d.Pinned, d.Persist
	j.Segments = []string{}
	walkSegments(d.Analysis.Parts, func(s policy.Segment) {
		j.Segments = append(j.Segments, s.Text)
		if s.RealPath == "" {
			j.Unpinned = true
			return
		}
		j.Exes = append(j.Exes, apitype.NodePlanExe{Path: s.RealPath, SHA256: fileSHA256(s.RealPath)})
	})
	sc := scriptOperand(d, canon)
	if sc != nil {
		j.Script = &apitype.NodePlanExe{Path: sc.Path, SHA256: sc.SHA256}
	}
	if d.Outcome == policy.OutcomeDeny {
		j.OwnDenies = policy.Evaluate(own.Request).Outcome == policy.OutcomeDeny
	}
	j.ApprovalTimeout = e.conf().ApprovalTimeout()
	request, resolved := eff.Request, resolution(d)
	j.Recheck = func() (bool, bool) {
		d := policy.Evaluate(request)
		return sameScript(scriptOperand(d, canon), sc), sameResolution(resolution(d), resolved)
	}
	return j, nil
}

// ReserveLocal creates the directory of session id on this home, for a
// run StartLocal starts; release removes it unless the run started. An
// id in use is port.ErrSessionIDInUse; another failure is an unwritable home.
func (e *Engine) ReserveLocal(id string) (release func(started bool), err error) {
	dir := proto.SessionDir(e.home, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if os.IsExist(err) {
			return nil, port.ErrSessionIDInUse
		}
		return nil, fmt.Errorf("conch home %s is not writable (%v)", e.home, err)
	}
	return func(started bool) {
		if !started {
			os.RemoveAll(dir)
		}
	}, nil
}

// Closed reports whether the engine is closing or closed.
func (e *Engine) Closed() bool { return e.isClosed() }

// StartLocal starts r as a supervised session of this home in the
// directory ReserveLocal made, and returns its process id.
func (e *Engine) StartLocal(r port.LocalRun) (pid int, err error) {
	set := e.conf().Exec(r.Agent)
	env := e.nodeEnv(set, r.Overrides, r.PTY)
	var keys []string
	for k := range r.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	run := &plan{
		Agent: r.Agent, Command: r.Command, Argv: nodeShellArgv(r.Argv), Env: env, EnvKeys: keys, Cwd: r.Cwd, Host: "node",
		PTY: r.PTY, Stdin: r.Stdin, Timeout: r.Timeout, Set: set, EnvHash: r.EnvHash,
		Local: true,
	}
	s := e.newSession(r.SessionID, proto.SessionDir(e.home, r.SessionID), r.Agent)
	s.st = state{
		Agent: r.Agent, Command: r.Command, Name: deriveName(r.Command), Cwd: r.Cwd, Host: "node",
		PTY: r.PTY, CreatedAt: time.Now().UnixMilli(), TimeoutSec: run.Timeout.Seconds(), Backgrounded: true,
		Gated: true, Notice: noticeState{Queued: true}, // the gateway tells its agent
	}
	if err := s.saveLocked(); err != nil {
		return 0, err
	}
	if err := e.launch(s, run, apitype.ExecParams{Command: r.Command, Env: r.Env}, r.RunID, r.ApprovalID, r.Pinned); err != nil {
		e.removeSession(s)
		return 0, fmt.Errorf("spawn failed: %w", err)
	}
	s.mu.Lock()
	pid = s.pid
	s.mu.Unlock()
	return pid, nil
}

// PersistAllow adds patterns to agent's allowlist in this home's
// approvals file (allow-always on a node) and records the change in the
// ledger, by "gateway:<runID>"; a failure is logged.
func (e *Engine) PersistAllow(agent string, patterns []string, command, runID string) {
	before, _ := approvals.Load(e.home)
	if added, err := approvals.AddAllow(e.home, agent, patterns, command); err != nil {
		e.log.Warn("persist allow-always", "err", err)
	} else if len(added) > 0 {
		if after, err := approvals.Load(e.home); err == nil {
			RecordPolicyChange(e.home, before, after, "gateway:"+runID)
		}
	}
}

// nodeEnv is the environment of a node run: see host.NodeEnv.
func (e *Engine) nodeEnv(set config.ExecSettings, overrides map[string]string, pty bool) []string {
	return host.NodeEnv(set.NonInteractiveEnv, overrides, pty)
}

// NodeSession returns the directory of session id on this home and a
// channel closed at its next change; ok is false for an unknown id.
func (e *Engine) NodeSession(id string) (dir string, changed <-chan struct{}, ok bool) {
	s, _ := e.sessions.Get(id)
	if s == nil {
		if !port.ValidSessionID(id) {
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
		if !port.ValidSessionID(id) {
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
