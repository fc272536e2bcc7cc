package registry

import (
	"testing"
	"time"
)

// TestExecRateLimiter: each agent has its own bucket of burst tokens,
// refilled at the rate; a refused call is told how long until the next
// token; a reload's new rate and burst apply to the bucket from then on.
func TestExecRateLimiter(t *testing.T) {
	var l Limiter
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 3 {
		if _, ok := l.Take("a", 2, 3, t0); !ok {
			t.Fatalf("call %d within the burst refused", i+1)
		}
	}
	wait, ok := l.Take("a", 2, 3, t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("call past the burst: ok %v, wait %v (want 500ms at 2/s)", ok, wait)
	}
	if _, ok := l.Take("b", 2, 3, t0); !ok {
		t.Fatal("agent b refused because agent a spent its burst")
	}
	if wait, ok := l.Take("a", 2, 3, t0.Add(250*time.Millisecond)); ok || wait != 250*time.Millisecond {
		t.Fatalf("a quarter second later: ok %v, wait %v", ok, wait)
	}
	if _, ok := l.Take("a", 2, 3, t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("a token refilled after 1/rate is refused")
	}
	// A long idle refills to the burst, not beyond.
	t1 := t0.Add(time.Hour)
	n := 0
	for ; n < 10; n++ {
		if _, ok := l.Take("a", 2, 3, t1); !ok {
			break
		}
	}
	if n != 3 {
		t.Fatalf("after an hour idle %d calls passed, want the burst 3", n)
	}
	// A reload lowers the rate: the wait grows accordingly.
	if wait, ok := l.Take("a", 0.5, 3, t1); ok || wait != 2*time.Second {
		t.Fatalf("after lowering the rate to 0.5/s: ok %v, wait %v", ok, wait)
	}
	// A fractional burst rounds down, and never below one call.
	t2 := t1.Add(time.Hour)
	if _, ok := l.Take("c", 1, 0.5, t2); !ok {
		t.Fatal("burst 0.5 allows no call at all")
	}
	if _, ok := l.Take("c", 1, 0.5, t2); ok {
		t.Fatal("burst 0.5 allowed two calls at once")
	}
}
