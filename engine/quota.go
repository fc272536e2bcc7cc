package engine

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// admit applies quotas.maxRunning and the exec rate limit
// to a new exec call of agent. On success the caller holds a running slot
// until it calls release (after the session is registered or failed to
// start), so concurrent calls cannot overshoot the quota.
func (e *Engine) admit(agent string) (release func(), _ *apitype.Error) {
	release = func() {}
	q := e.conf().Quota(agent)
	if q.ExecPerSecond > 0 {
		if wait, ok := e.limit.Take(agent, q.ExecPerSecond, q.ExecBurst, time.Now()); !ok {
			ms := max(wait.Milliseconds(), 1)
			return release, apitype.Errorf("rate_limited", "rate limit exceeded: agent %s may start %s exec calls per second (quotas.execPerSecond); retry in %d ms.",
				agent, strconv.FormatFloat(q.ExecPerSecond, 'f', -1, 64), ms)
		}
	}
	if q.MaxRunning > 0 {
		release, n, ok := e.admission.Admit(agent, q.MaxRunning, func() int { return e.runningOf(agent) })
		if !ok {
			return release, apitype.Errorf("quota_exceeded", "quota exceeded: agent %s already has %d running sessions (quotas.maxRunning); kill or wait for one first.", agent, n)
		}
		return release, nil
	}
	return release, nil
}

// runningOf counts agent's running sessions that are not waiting for an
// approval.
func (e *Engine) runningOf(agent string) int {
	return e.sessions.Count(func(s *session) bool { return s.agent == agent && startedRunning(s) })
}

// retainLater runs retain for agent in the background. It is due when a
// session that counts against quotas.maxRetained (a background or
// retained one) has ended: the end itself (ended) when the session was
// already so marked, else the call that marks it after its end.
func (e *Engine) retainLater(agent string) {
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.retain(agent) }()
}

// retain evicts agent's oldest finished sessions beyond quotas.maxRetained
// and while its journals exceed quotas.journalBytes, telling
// the agent which and why. Running sessions are never evicted.
func (e *Engine) retain(agent string) {
	e.retainMu.Lock()
	defer e.retainMu.Unlock()
	q := e.conf().Quota(agent)
	finished := e.sessions.Select(func(s *session) bool { return s.agent == agent && !s.running() })
	var total int64
	sizes := map[*session]int64{}
	if q.JournalBytes > 0 {
		for _, s := range e.sessions.Select(func(s *session) bool { return s.agent == agent }) {
			if info, err := journal.Stat(s.journal()); err == nil {
				sizes[s] = info.Bytes
				total += info.Bytes
			}
		}
	}
	sort.Slice(finished, func(i, j int) bool {
		_, a, _ := finished[i].snapshot()
		_, b, _ := finished[j].snapshot()
		return a.EndedAt < b.EndedAt
	})
	evict := func(s *session, reason string) {
		// The notice is queued before the session disappears, so an
		// agent that no longer sees it is always told why.
		e.queueNotice(s, apitype.Notice{Kind: "evicted", SessionID: s.id, Text: fmt.Sprintf("Exec session %s evicted (%s)", s.id, reason)})
		e.emit("session.evicted", agent, map[string]any{"sessionId": s.id, "reason": reason})
		e.forget(s)
		e.removeSession(s)
	}
	// maxRetained evicts only results that were read (poll, log, wait,
	// or an exec result delivered) or that are older than minRetainAge,
	// the oldest first: an unread young result is kept past the cap.
	if q.MaxRetained > 0 && len(finished) > q.MaxRetained {
		now := time.Now()
		over := len(finished) - q.MaxRetained
		kept := finished[:0:0]
		for _, s := range finished {
			st, ex, _ := s.snapshot()
			read := st.ObservedEnd || st.Retained && !st.Backgrounded
			if over > 0 && (read || now.Sub(time.UnixMilli(ex.EndedAt)) >= q.MinRetainAge) {
				evict(s, "quotas.maxRetained")
				total -= sizes[s]
				over--
				continue
			}
			kept = append(kept, s)
		}
		finished = kept
	}
	for len(finished) > 0 && q.JournalBytes > 0 && total > q.JournalBytes {
		evict(finished[0], "quotas.journalBytes")
		total -= sizes[finished[0]]
		finished = finished[1:]
	}
	if q.JournalBytes > 0 && total > q.JournalBytes {
		e.trimRunning(agent, sizes, total, q.JournalBytes)
	}
}

// trimRunning trims the journals of agent's running sessions, largest
// first, to an equal share of limit each, until the agent's total is
// within it (the quota's last resort, when no finished session is left to
// evict). A journal keeps
// its head and its newest tail; the agent is told once per session.
func (e *Engine) trimRunning(agent string, sizes map[*session]int64, total, limit int64) {
	var running []*session
	for s := range sizes {
		if s.running() {
			running = append(running, s)
		}
	}
	if len(running) == 0 {
		return
	}
	sort.Slice(running, func(i, j int) bool { return sizes[running[i]] > sizes[running[j]] })
	share := limit / int64(len(running))
	for _, s := range running {
		if total <= limit {
			return
		}
		if sizes[s] <= share {
			continue
		}
		s.mu.Lock()
		socket := s.socket
		s.mu.Unlock()
		rep, err := supervisor.Call(socket, proto.Request{Op: "trim", Session: s.id, MaxBytes: share})
		if err != nil {
			e.log.Warn("trim journal", "session", s.id, "err", err)
			continue
		}
		total -= sizes[s] - rep.Bytes
		s.mu.Lock()
		first := !s.trimmed
		s.trimmed = true
		s.mu.Unlock()
		if first {
			// A deliberate cut, not damage: reads show it as dropped
			// output. Said once per session, like the notice.
			e.log.Warn("journal trimmed by quota", "session", s.id, "agent", agent, "before", sizes[s], "after", rep.Bytes, "quota", "quotas.journalBytes")
			reason := "journal trimmed to head + tail (quotas.journalBytes)"
			e.queueNotice(s, apitype.Notice{Kind: "evicted", SessionID: s.id, Text: fmt.Sprintf("Exec session %s evicted (%s)", s.id, reason)})
			e.emit("session.evicted", agent, map[string]any{"sessionId": s.id, "reason": reason})
		}
	}
}

// checkJournals runs the journal quota for agent in the background once
// its running sessions have written enough since the last check; several
// triggers while one check runs make one.
func (e *Engine) checkJournals(agent string) {
	e.mu.Lock()
	if e.retaining == nil {
		e.retaining = map[string]bool{}
	}
	if e.retaining[agent] || e.closed {
		e.mu.Unlock()
		return
	}
	e.retaining[agent] = true
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		e.retain(agent)
		e.mu.Lock()
		delete(e.retaining, agent)
		e.mu.Unlock()
	}()
}
