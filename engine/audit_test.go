package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/ledger"
	"github.com/conchsh/conch/internal/supervisor"
)

// openHome opens an engine on home (closed at the test's end).
func openHome(t *testing.T, home string) *Engine {
	t.Helper()
	e, err := New(Options{Home: home, SupervisorArgv: []string{os.Args[0], "supervise"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestLedgerEndObservedAfterRestart: sessions that end while no engine
// runs (the engine was closed, as on SIGTERM, while they ran) get their
// ledger end record from the next engine, marked observed, with the end
// state of exit.json; once recorded, later engines do not record it again,
// and verify lists a session as open exactly while it has no end record.
func TestLedgerEndObservedAfterRestart(t *testing.T) {
	home := t.TempDir()
	seedLoginCache(home)
	e1 := openHome(t, home)
	yes := true
	gate := filepath.Join(t.TempDir(), "go")
	var ids []string
	for _, cmd := range []string{"while [ ! -e " + gate + " ]; do sleep 0.02; done; echo done", "while [ ! -e " + gate + " ]; do sleep 0.02; done; exit 3"} {
		r := e1.Exec(context.Background(), "main", apitype.ExecParams{Command: cmd, Background: &yes})
		d, ok := r.Details.(*apitype.ExecDetails)
		if !ok || d.SessionID == "" {
			t.Fatalf("exec: %q %#v", r.Text, r.Details)
		}
		ids = append(ids, d.SessionID)
	}
	e1.Close()
	rep, err := ledger.Verify(home)
	if err != nil || !rep.OK || rep.OpenCount != 2 {
		t.Fatalf("verify while the sessions run: %v %+v (want 2 open)", err, rep)
	}
	// The sessions end while no engine runs.
	os.WriteFile(gate, nil, 0o600)
	for _, id := range ids {
		waitFor(t, id+"'s exit.json", func() bool {
			var ex supervisor.Exit
			return supervisor.ReadJSON(supervisor.ExitPath(filepath.Join(home, "sessions", id)), &ex) == nil && ex.Final
		})
	}
	for i := 0; i < 2; i++ {
		openHome(t, home).Close()
	}
	ends := map[string]int{}
	recs, err := ledger.Tail(home, 0, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		m, _ := r.Fields.(map[string]any)
		if r.Type != ledger.TypeEnd {
			continue
		}
		id, _ := m["sessionId"].(string)
		ends[id]++
		if m["observed"] != true || m["state"] != "exited" || m["endedAtMs"] == nil {
			t.Errorf("end record of %s: %v (want observed, exited, endedAtMs)", id, m)
		}
	}
	for _, id := range ids {
		if ends[id] != 1 {
			t.Errorf("session %s: %d end records, want 1", id, ends[id])
		}
	}
	rep, err = ledger.Verify(home)
	if err != nil || !rep.OK || rep.OpenCount != 0 {
		t.Fatalf("verify after the restart: %v %+v (want none open)", err, rep)
	}
}
