package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// TestStopAnswersCallsInFlight: Stop answers every call in flight at once
// (exec calls in their yield window return running and their commands keep
// running, a process wait returns), refuses new calls, and kills nothing;
// a caller's own cancel still kills its run with killedBy "agent".
func TestStopAnswersCallsInFlight(t *testing.T) {
	e := newEngine(t)
	yes := true
	bg := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "sleep 60", Background: &yes})
	bgID := bg.Details.(*apitype.ExecDetails).SessionID

	// A caller that gives up kills its run (the other cause).
	cctx, cancel := context.WithCancel(context.Background())
	agentDone := make(chan apitype.Result, 1)
	go func() {
		agentDone <- e.Call(cctx, "main", "exec", json.RawMessage(`{"command":"sleep 60","yieldMs":120000}`))
	}()
	waitInFlight(t, e, 1)
	cancel()
	select {
	case r := <-agentDone:
		d := r.Details.(*apitype.ExecDetails)
		if d.State != proto.StateKilled || d.KilledBy == nil || *d.KilledBy != string(proto.KilledByAgent) {
			t.Fatalf("cancelled call: %q %+v", r.Text, d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cancelled call not answered")
	}

	const n = 3
	results := make(chan apitype.Result, n+1)
	for i := 0; i < n; i++ {
		go func() {
			results <- e.Call(context.Background(), "main", "exec", json.RawMessage(`{"command":"sleep 60","yieldMs":120000}`))
		}()
	}
	go func() {
		results <- e.Call(context.Background(), "main", "process", json.RawMessage(`{"action":"wait","sessionId":"`+bgID+`","timeout":120000}`))
	}()
	waitInFlight(t, e, n+1)
	// Every exec has its session (a call counts from its entry, its
	// session from its spawn).
	deadline := time.Now().Add(30 * time.Second)
	for len(e.Sessions()) < n+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := e.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	var ids []string
	for i := 0; i < n+1; i++ {
		r := <-results
		switch d := r.Details.(type) {
		case *apitype.ExecDetails:
			if d.Status != "running" || d.SessionID == "" {
				t.Errorf("exec answered %q %+v, want running", r.Text, d)
			}
			ids = append(ids, d.SessionID)
		case *apitype.WaitDetails:
		default:
			t.Errorf("answer %q %T", r.Text, r.Details)
		}
	}
	r := e.Call(context.Background(), "main", "exec", json.RawMessage(`{"command":"true"}`))
	if d, ok := r.Details.(*apitype.ErrorDetails); !ok || d.Error.Code != apitype.CodeUnavailable || r.Text != stoppingText {
		t.Errorf("call after Stop: %q %+v", r.Text, r.Details)
	}
	for _, id := range append(ids, bgID) {
		s := e.lookup("main", id)
		if s == nil || !s.running() {
			t.Errorf("session %s is not running after Stop", id)
			continue
		}
		if st, _, _ := s.snapshot(); !st.Backgrounded {
			t.Errorf("session %s is not backgrounded", id)
		}
		e.killSession(s, proto.KilledByShutdown)
		select {
		case <-s.ended:
		case <-time.After(30 * time.Second):
			t.Errorf("session %s did not end", id)
		}
	}
}

// waitInFlight waits until n calls are in flight.
func waitInFlight(t *testing.T, e *Engine, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.calls.mu.Lock()
		got := len(e.calls.cancels)
		e.calls.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls in flight, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
