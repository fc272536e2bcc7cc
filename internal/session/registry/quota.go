package registry

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter holds the agents' exec rate limiters: a token bucket each, from
// golang.org/x/time/rate. The zero value is ready to use.
type Limiter struct {
	mu     sync.Mutex // guards agents
	agents map[string]*rate.Limiter
}

// Take spends one token of agent's bucket (refilled at perSecond, holding
// at most burst, rounded down and at least 1), or returns how long until a
// token is there. A changed rate or burst (a reload) applies from now on to
// the tokens the bucket holds.
func (l *Limiter) Take(agent string, perSecond, burst float64, now time.Time) (time.Duration, bool) {
	b := max(int(burst), 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.agents == nil {
		l.agents = map[string]*rate.Limiter{}
	}
	lim := l.agents[agent]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(perSecond), b)
		l.agents[agent] = lim
	}
	if lim.Limit() != rate.Limit(perSecond) {
		lim.SetLimitAt(now, rate.Limit(perSecond))
	}
	if lim.Burst() != b {
		lim.SetBurstAt(now, b)
	}
	if lim.AllowN(now, 1) {
		return 0, true
	}
	return time.Duration((1 - lim.TokensAt(now)) / perSecond * float64(time.Second)), false
}

// Admission applies a per-agent cap on running sessions to new exec calls
// (quotas.maxRunning). A call admitted holds a slot until it releases it,
// which it does once its session is registered (and so counted by the
// caller's running function) or failed to start: concurrent calls cannot
// overshoot the cap. The zero value is ready to use.
type Admission struct {
	mu       sync.Mutex     // guards admitted; held while running is called
	admitted map[string]int // calls between admission and release, per agent
}

// Admit admits a call of agent when fewer than limit of its calls run:
// running() sessions plus the calls admitted and not yet released.
// running is called under the admission's lock (it must not call the
// Admission). It returns the count it found; on success release gives the
// slot back (once, however often it is called); on refusal release is a
// no-op and ok is false.
func (a *Admission) Admit(agent string, limit int, running func() int) (release func(), n int, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n = a.admitted[agent] + running()
	if n >= limit {
		return func() {}, n, false
	}
	if a.admitted == nil {
		a.admitted = map[string]int{}
	}
	a.admitted[agent]++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			a.admitted[agent]--
			if a.admitted[agent] == 0 {
				delete(a.admitted, agent)
			}
			a.mu.Unlock()
		})
	}, n, true
}

// Admitted returns the number of agent's calls admitted and not released.
func (a *Admission) Admitted(agent string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.admitted[agent]
}
