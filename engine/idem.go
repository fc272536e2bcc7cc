package engine

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/registry"
)

func (e *Engine) idemPath() string { return filepath.Join(e.home, "state", "idempotency.json") }

// loadIdem opens the idempotency store (registry.IdemStore); a damaged
// file is reported and its keys are forgotten.
func (e *Engine) loadIdem() {
	st, err := registry.OpenIdem(e.idemPath())
	if errors.Is(err, fsutil.ErrDamaged) {
		e.damaged("idempotency", e.idemPath(), err, "idempotency keys forgotten")
	}
	e.idem = st
}

// idemExpired reports whether an entry may be forgotten: past its TTL
// and its session gone. The store calls it under its own lock, and it
// takes the session table's (lock order: store, then table).
func (e *Engine) idemExpired(now time.Time) func(*registry.IdemEntry) bool {
	return func(en *registry.IdemEntry) bool {
		ttl := time.Duration(e.conf().Exec(en.Agent).IdempotencyTTL) * time.Millisecond
		if now.Sub(time.UnixMilli(en.CreatedAt)) < ttl {
			return false
		}
		return !e.sessions.Has(en.SessionID)
	}
}

// idempotent runs exec once per (agent, key, fingerprint): retries join
// or replay the first call's outcome; no second process is spawned. The
// store's file is written outside every engine lock, before the first
// call's answer is returned.
func (e *Engine) idempotent(ctx context.Context, agent string, p apitype.ExecParams, run func() apitype.Result) apitype.Result {
	now := time.Now()
	en, outcome := e.idem.Begin(agent, p.IdempotencyKey, fingerprint(p), now.UnixMilli(), e.idemExpired(now))
	switch outcome {
	case registry.IdemConflict:
		return execError(apitype.Errorf("idempotency_conflict", "idempotencyKey %q was already used for a different request.", p.IdempotencyKey))
	case registry.IdemReplay:
		if en.Wait(ctx) != nil {
			return execError(apitype.Errorf("timeout", "the first call with idempotencyKey %q is still running", p.IdempotencyKey))
		}
		return e.replay(agent, en)
	}
	res := run()
	b, _ := json.Marshal(res.Details)
	var sid struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(b, &sid)
	// A call that did not run leaves nothing to de-duplicate.
	if err := e.idem.Finish(en, sid.SessionID, res, !res.IsError()); err != nil {
		e.log.Warn("write idempotency keys", "err", err)
	}
	return res
}

// replay answers a retry: the session's current state when it still
// exists, else the stored result.
func (e *Engine) replay(agent string, en *registry.IdemEntry) apitype.Result {
	s := e.lookup(agent, en.SessionID)
	if s == nil || s.pending() {
		return en.Result()
	}
	st, ex, _ := s.snapshot()
	if ex == nil {
		return e.runningResult(s)
	}
	set := e.conf().Exec(agent)
	out := e.output(s, set.MaxOutputChars)
	res := endResult(s, *ex, out, set)
	res.Details.(*apitype.ExecDetails).Host = st.Host
	return res
}

// runningResult is the `running` result of a session.
func (e *Engine) runningResult(s *session) apitype.Result {
	st, _, cursor := s.snapshot()
	tail, _, screen := e.viewTail(s, 2000)
	s.mu.Lock()
	pid := s.pid
	stdin := s.meta.Stdin
	s.mu.Unlock()
	pty := st.PTY
	text := runningText(s.id, pid, stdin, tail, screen)
	return apitype.Result{Text: text, Details: &apitype.ExecDetails{
		Status: "running", SessionID: s.id, PID: &pid, StartedAt: s.start.UnixMilli(), Cwd: st.Cwd,
		Tail: &tail, Cursor: cursor, Name: st.Name, PTY: &pty, Host: st.Host,
	}}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
