package registry

import (
	"sync/atomic"
	"testing"
)

// TestAdmission: the cap counts running sessions and admitted calls; a
// release frees the slot once however often it is called; agents are
// counted apart.
func TestAdmission(t *testing.T) {
	var a Admission
	running := 1
	count := func() int { return running }
	r1, n, ok := a.Admit("x", 3, count)
	if !ok || n != 1 {
		t.Fatalf("first: ok %v n %d", ok, n)
	}
	r2, _, ok := a.Admit("x", 3, count)
	if !ok {
		t.Fatal("second refused")
	}
	if _, n, ok := a.Admit("x", 3, count); ok || n != 3 {
		t.Fatalf("third: ok %v n %d (1 running + 2 admitted = cap 3)", ok, n)
	}
	if _, _, ok := a.Admit("y", 3, func() int { return 0 }); !ok {
		t.Fatal("agent y refused for x's calls")
	}
	r1()
	r1()
	if a.Admitted("x") != 1 {
		t.Fatalf("admitted after a double release: %d", a.Admitted("x"))
	}
	if _, _, ok := a.Admit("x", 3, count); !ok {
		t.Fatal("refused after a release")
	}
	r2()
}

// TestAdmissionConcurrent: concurrent callers never hold more slots than
// the cap (run with -race).
func TestAdmissionConcurrent(t *testing.T) {
	var a Admission
	const limit = 5
	var held, peak atomic.Int32
	hammer(64, 20, func(int, int) {
		release, _, ok := a.Admit("x", limit, func() int { return 0 })
		if !ok {
			return
		}
		h := held.Add(1)
		for {
			p := peak.Load()
			if h <= p || peak.CompareAndSwap(p, h) {
				break
			}
		}
		held.Add(-1)
		release()
	})
	if peak.Load() > limit {
		t.Fatalf("%d slots held at once, cap %d", peak.Load(), limit)
	}
	if a.Admitted("x") != 0 {
		t.Fatalf("%d slots left after every release", a.Admitted("x"))
	}
}
