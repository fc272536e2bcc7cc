package httpapi

import (
	"context"
	"errors"
	"testing"

	"github.com/conchsh/conch/engine"
)

// TestProxyStopAnswersItsCalls: a proxy's stop cancels its calls in flight
// and those that arrive later with engine.ErrStopping (the engine answers
// them as on its own stop), and no other proxy's.
func TestProxyStopAnswersItsCalls(t *testing.T) {
	var p proxyCalls
	a1, leave1 := p.enter(context.Background(), "a")
	defer leave1()
	a2, leave2 := p.enter(context.Background(), "a")
	leave2() // answered before the stop
	b, leaveB := p.enter(context.Background(), "b")
	defer leaveB()
	if n := p.stop("a"); n != 1 {
		t.Fatalf("stop answered %d calls, want 1", n)
	}
	if !errors.Is(context.Cause(a1), engine.ErrStopping) {
		t.Fatalf("call in flight: cause %v", context.Cause(a1))
	}
	if errors.Is(context.Cause(a2), engine.ErrStopping) {
		t.Fatal("a call answered before the stop was cancelled by it")
	}
	if b.Err() != nil {
		t.Fatalf("another proxy's call: %v", context.Cause(b))
	}
	late, leaveLate := p.enter(context.Background(), "a")
	defer leaveLate()
	if !errors.Is(context.Cause(late), engine.ErrStopping) {
		t.Fatalf("call after the stop: cause %v", context.Cause(late))
	}
}

// TestProxyStopSocketOnly: the stop route is not served over TCP, not even
// to the operator.
func TestProxyStopSocketOnly(t *testing.T) {
	u := newUITest(t, false)
	resp, m := u.req("POST", "/v1/proxies/abc/stop", nil, map[string]string{"Bearer": testOperator})
	if resp.StatusCode != 404 {
		t.Fatalf("over TCP: %d %v", resp.StatusCode, m)
	}
}
