package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/conchsh/conch/apitype"
)

// ErrStopping is the cause with which Stop cancels the contexts of the
// calls in flight. A call whose context ends with it is answered, not
// abandoned: an exec call in its yield window returns its running result
// and the command keeps running as a background session, where a context
// cancelled for another reason (the caller gave up) kills the command with
// killedBy "agent".
var ErrStopping = errors.New("conch is stopping")

// stoppingText answers calls that arrive once the engine stops.
const stoppingText = "conch engine is shutting down."

// inflight tracks the calls in flight through Call, so that Stop can
// answer every one of them before an adapter closes its transport.
type inflight struct {
	mu       sync.Mutex // guards the fields below
	stopping bool
	next     uint64
	cancels  map[uint64]context.CancelCauseFunc // one per call in flight
	idle     chan struct{}                      // closed when stopping and no call is in flight
	stopped  chan struct{}                      // closed when Stop starts
}

func (f *inflight) init() {
	f.cancels = map[uint64]context.CancelCauseFunc{}
	f.idle = make(chan struct{})
	f.stopped = make(chan struct{})
}

// enter registers a call. It returns the context the call runs with
// (cancelled with ErrStopping by Stop) and the function that ends the
// registration, or ok=false once the engine stops.
func (f *inflight) enter(ctx context.Context) (context.Context, func(), bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopping {
		return ctx, func() {}, false
	}
	cctx, cancel := context.WithCancelCause(ctx)
	id := f.next
	f.next++
	f.cancels[id] = cancel
	return cctx, func() {
		cancel(nil)
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.cancels, id)
		if f.stopping && len(f.cancels) == 0 {
			select {
			case <-f.idle:
			default:
				close(f.idle)
			}
		}
	}, true
}

// stop refuses new calls, cancels those in flight with ErrStopping and
// returns a channel closed once none is in flight.
func (f *inflight) stop() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopping {
		f.stopping = true
		close(f.stopped)
		for _, cancel := range f.cancels {
			cancel(ErrStopping)
		}
		if len(f.cancels) == 0 {
			close(f.idle)
		}
	}
	return f.idle
}

// Stop is the first step of an orderly shutdown (SIGTERM, SIGINT): it
// refuses new calls (they get the error "conch engine is shutting down.",
// code unavailable) and answers every call in flight at once. An exec call
// in its yield window returns its running result with the session id; the
// session is backgrounded and keeps running (Close then ends it with
// killedBy "shutdown" when sessions.survive is false). A process wait or
// poll returns what it has; an approval wait returns the pending
// approval. Stop returns once no call is in flight, or with ctx's error.
// Adapters call Stop, write the answers, then close their transports and
// the engine. Safe to call more than once and concurrently.
func (e *Engine) Stop(ctx context.Context) error {
	idle := e.calls.stop()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stopping returns a channel that is closed when Stop starts: adapters
// that wait on the agent's client during a call (an elicitation) stop
// waiting then.
func (e *Engine) Stopping() <-chan struct{} { return e.calls.stopped }

// stoppingResult is the answer of a call that arrives once Stop started.
func stoppingResult(tool string) apitype.Result {
	err := apitype.Errorf(apitype.CodeUnavailable, stoppingText)
	switch tool {
	case "process":
		return processError(err)
	case "apply_patch":
		return patchError(err)
	}
	return execError(err)
}
