package engine

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/journal"
)

// bucket is a token bucket for one agent's exec calls.
type bucket struct {
	tokens float64
	last   time.Time
}

// limiter holds the agents' buckets (exec.md §11).
type limiter struct {
	mu      sync.Mutex // guards buckets
	buckets map[string]*bucket
}

// take spends one token of agent's bucket, or returns how long to wait.
func (l *limiter) take(agent string, rate, burst float64, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[agent]
	if b == nil {
		b = &bucket{tokens: burst, last: now}
		l.buckets[agent] = b
	}
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / rate * float64(time.Second)), false
}

// admit applies quotas.maxRunning and the exec rate limit to a new exec
// call of agent. On success the caller holds a running slot until it
// calls release (after the session is registered or failed to start), so
// concurrent calls cannot overshoot the quota.
func (e *Engine) admit(agent string) (release func(), _ *apitype.Error) {
	release = func() {}
	q := e.conf().Quota(agent)
	if q.ExecPerSecond > 0 {
		if wait, ok := e.limit.take(agent, q.ExecPerSecond, q.ExecBurst, time.Now()); !ok {
			ms := max(wait.Milliseconds(), 1)
			return release, apitype.Errorf("rate_limited", "rate limit exceeded: agent %s may start %s exec calls per second (quotas.execPerSecond); retry in %d ms.",
				agent, strconv.FormatFloat(q.ExecPerSecond, 'f', -1, 64), ms)
		}
	}
	if q.MaxRunning > 0 {
		e.mu.Lock()
		defer e.mu.Unlock()
		n := e.admitted[agent]
		for _, s := range e.sessions {
			if s.agent == agent && s.running() && !s.pending() {
				n++
			}
		}
		if n >= q.MaxRunning {
			return release, apitype.Errorf("quota_exceeded", "quota exceeded: agent %s already has %d running sessions (quotas.maxRunning); kill or wait for one first.", agent, n)
		}
		if e.admitted == nil {
			e.admitted = map[string]int{}
		}
		e.admitted[agent]++
		var once sync.Once
		release = func() {
			once.Do(func() {
				e.mu.Lock()
				e.admitted[agent]--
				e.mu.Unlock()
			})
		}
	}
	return release, nil
}

// retain evicts agent's oldest finished sessions beyond quotas.maxRetained
// and while its journals exceed quotas.journalBytes (exec.md §11), telling
// the agent which and why. Running sessions are never evicted.
func (e *Engine) retain(agent string) {
	q := e.conf().Quota(agent)
	e.mu.Lock()
	var finished []*session
	var total int64
	for _, s := range e.sessions {
		if s.agent != agent {
			continue
		}
		if !s.running() {
			finished = append(finished, s)
		}
	}
	e.mu.Unlock()
	sizes := map[*session]int64{}
	if q.JournalBytes > 0 {
		e.mu.Lock()
		all := make([]*session, 0, len(e.sessions))
		for _, s := range e.sessions {
			if s.agent == agent {
				all = append(all, s)
			}
		}
		e.mu.Unlock()
		for _, s := range all {
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
		e.queueNotice(s, Notice{Kind: "evicted", SessionID: s.id, Text: fmt.Sprintf("Exec session %s evicted (%s)", s.id, reason)})
		e.emit("session.evicted", agent, map[string]any{"sessionId": s.id, "reason": reason})
		e.forget(s)
		s.remove()
	}
	for len(finished) > 0 && q.MaxRetained > 0 && len(finished) > q.MaxRetained {
		evict(finished[0], "quotas.maxRetained")
		total -= sizes[finished[0]]
		finished = finished[1:]
	}
	for len(finished) > 0 && q.JournalBytes > 0 && total > q.JournalBytes {
		evict(finished[0], "quotas.journalBytes")
		total -= sizes[finished[0]]
		finished = finished[1:]
	}
}
