package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/supervisor"
)

// idemEntry is one idempotency key of one agent (exec.md §10).
type idemEntry struct {
	Agent       string          `json:"agent"`
	Key         string          `json:"key"`
	Fingerprint string          `json:"fingerprint"`
	SessionID   string          `json:"sessionId,omitempty"`
	CreatedAt   int64           `json:"createdAt"`
	Text        string          `json:"text"`
	Details     json.RawMessage `json:"details"`

	done chan struct{} // closed when the first call returned; nil once loaded
	res  apitype.Result
}

func idemKey(agent, key string) string { return agent + "\x00" + key }

// inFlight reports whether the first call with this key has not returned.
func (en *idemEntry) inFlight() bool {
	if en.done == nil {
		return false
	}
	select {
	case <-en.done:
		return false
	default:
		return true
	}
}

func (e *Engine) idemPath() string { return filepath.Join(e.home, "state", "idempotency.json") }

// loadIdem reads the stored idempotency entries.
func (e *Engine) loadIdem() {
	e.idem = map[string]*idemEntry{}
	// The entries are an object's "entries" (checksummed by WriteJSON);
	// an earlier conch wrote the bare list.
	var raw json.RawMessage
	err := supervisor.ReadJSON(e.idemPath(), &raw)
	if errors.Is(err, supervisor.ErrDamaged) {
		e.damaged("idempotency", e.idemPath(), err, "idempotency keys forgotten")
	}
	if err != nil {
		return
	}
	var list []*idemEntry
	if len(raw) > 0 && raw[0] == '[' {
		json.Unmarshal(raw, &list)
	} else {
		var f struct {
			Entries []*idemEntry `json:"entries"`
		}
		json.Unmarshal(raw, &f)
		list = f.Entries
	}
	for _, en := range list {
		en.res = apitype.Result{Text: en.Text, Details: en.Details}
		e.idem[idemKey(en.Agent, en.Key)] = en
	}
}

// saveIdemLocked writes the entries; e.mu must be held.
func (e *Engine) saveIdemLocked() {
	list := make([]*idemEntry, 0, len(e.idem))
	for _, en := range e.idem {
		if !en.inFlight() {
			list = append(list, en)
		}
	}
	os.MkdirAll(filepath.Dir(e.idemPath()), 0o700)
	supervisor.WriteJSON(e.idemPath(), struct {
		Entries []*idemEntry `json:"entries"`
	}{list})
}

// expiredLocked reports whether an entry may be forgotten: past its TTL
// and its session gone.
func (e *Engine) expiredLocked(en *idemEntry, now time.Time) bool {
	ttl := time.Duration(e.conf().Exec(en.Agent).IdempotencyTTL) * time.Millisecond
	if now.Sub(time.UnixMilli(en.CreatedAt)) < ttl {
		return false
	}
	_, live := e.sessions[en.SessionID]
	return !live
}

// idempotent runs exec once per (agent, key, fingerprint): retries join
// or replay the first call's outcome; no second process is spawned.
func (e *Engine) idempotent(ctx context.Context, agent string, p apitype.ExecParams, run func() apitype.Result) apitype.Result {
	fp := fingerprint(p)
	k := idemKey(agent, p.IdempotencyKey)
	e.mu.Lock()
	en := e.idem[k]
	if en != nil && e.expiredLocked(en, time.Now()) {
		delete(e.idem, k)
		en = nil
	}
	if en != nil {
		e.mu.Unlock()
		if en.Fingerprint != fp {
			return execError(apitype.Errorf("idempotency_conflict", "idempotencyKey %q was already used for a different request.", p.IdempotencyKey))
		}
		if en.done != nil {
			select {
			case <-en.done:
			case <-ctx.Done():
				return execError(apitype.Errorf("timeout", "the first call with idempotencyKey %q is still running", p.IdempotencyKey))
			}
		}
		return e.replay(agent, en)
	}
	en = &idemEntry{Agent: agent, Key: p.IdempotencyKey, Fingerprint: fp, CreatedAt: time.Now().UnixMilli(), done: make(chan struct{})}
	e.idem[k] = en
	e.mu.Unlock()

	res := run()
	b, _ := json.Marshal(res.Details)
	var sid struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(b, &sid)
	e.mu.Lock()
	en.SessionID, en.Text, en.Details, en.res = sid.SessionID, res.Text, b, res
	close(en.done)
	if res.IsError() {
		// A call that did not run leaves nothing to de-duplicate.
		delete(e.idem, k)
	}
	e.saveIdemLocked()
	e.mu.Unlock()
	return res
}

// replay answers a retry: the session's current state when it still
// exists, else the stored result.
func (e *Engine) replay(agent string, en *idemEntry) apitype.Result {
	s := e.lookup(agent, en.SessionID)
	if s == nil || s.pending() {
		return en.res
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

// runningResult is the `running` result of a session (exec.md §8.3).
func (e *Engine) runningResult(s *session) apitype.Result {
	st, _, cursor := s.snapshot()
	tail, _ := e.tail(s, 2000)
	s.mu.Lock()
	pid := s.pid
	s.mu.Unlock()
	pty := st.PTY
	text := "Command still running (session " + s.id + ", pid " + itoa(pid) + "). Use process (list/poll/log/wait/write/kill/clear/remove) for follow-up."
	if tail != "" {
		text += "\n\nOutput so far (last " + itoa(len([]rune(tail))) + " chars):\n" + tail
	}
	return apitype.Result{Text: text, Details: &apitype.ExecDetails{
		Status: "running", SessionID: s.id, PID: &pid, StartedAt: s.start.UnixMilli(), Cwd: st.Cwd,
		Tail: &tail, Cursor: cursor, Name: st.Name, PTY: &pty, Host: st.Host,
	}}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
