package httpapi

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/conchsh/conch/engine"
)

// A `conch mcp` that proxies to this engine over its socket tags each call
// with its own random id (header X-Conch-Proxy-Id). When it gets a stop
// signal it posts /v1/proxies/{id}/stop: every call of that proxy in
// flight is then answered at once, as the engine's own calls are when it
// stops (an exec in its yield window returns running with its session id
// and the command keeps running), instead of at the end of its yield
// window. Calls of a stopped proxy that arrive afterwards (sent before the
// stop, on another connection) are answered the same way.

// stoppedProxyTTL is how long a stopped proxy's id is remembered.
const stoppedProxyTTL = 5 * time.Minute

// proxyCalls tracks the calls in flight of proxying conch mcp processes.
type proxyCalls struct {
	mu      sync.Mutex
	next    uint64
	calls   map[string]map[uint64]context.CancelCauseFunc // proxy id → calls in flight
	stopped map[string]time.Time                          // proxy id → when it stopped
}

// enter registers a call of proxy id and returns its context (cancelled
// with engine.ErrStopping when the proxy stops) and the function that
// ends the registration.
func (p *proxyCalls) enter(ctx context.Context, id string) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.stopped[id]; ok {
		cancel(engine.ErrStopping)
		return cctx, func() {}
	}
	if p.calls == nil {
		p.calls = map[string]map[uint64]context.CancelCauseFunc{}
	}
	if p.calls[id] == nil {
		p.calls[id] = map[uint64]context.CancelCauseFunc{}
	}
	n := p.next
	p.next++
	p.calls[id][n] = cancel
	return cctx, func() {
		cancel(nil)
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.calls[id], n)
		if len(p.calls[id]) == 0 {
			delete(p.calls, id)
		}
	}
}

// stop answers every call of proxy id in flight and the ones that arrive
// later; it returns how many were in flight.
func (p *proxyCalls) stop(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.stopped == nil {
		p.stopped = map[string]time.Time{}
	}
	for old, at := range p.stopped {
		if now.Sub(at) > stoppedProxyTTL {
			delete(p.stopped, old)
		}
	}
	p.stopped[id] = now
	n := 0
	for _, cancel := range p.calls[id] {
		cancel(engine.ErrStopping)
		n++
	}
	return n
}

// validProxyID accepts the ids a proxy makes: 1 to 64 characters of
// [0-9a-zA-Z-].
func validProxyID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// stopProxy serves POST /v1/proxies/{id}/stop (engine socket only).
func (s *Server) stopProxy(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validProxyID(id) {
		writeError(w, http.StatusBadRequest, "invalid_argument", "invalid proxy id")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"answered": s.proxies.stop(id)})
}
