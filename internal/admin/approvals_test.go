package admin

import (
	"errors"
	"testing"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/approvals"
	"github.com/conchsh/conch/internal/ledger"
)

func parse(t *testing.T, s string) *approvals.File {
	t.Helper()
	f, err := approvals.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func policyRecords(t *testing.T, home string) []ledger.Record {
	t.Helper()
	recs, err := ledger.Tail(home, 0, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.Record
	for _, r := range recs {
		if r.Type == ledger.TypePolicy {
			out = append(out, r)
		}
	}
	return out
}

// TestSetApprovals: a set saves the file, appends one ledger policy record
// and publishes one policy.changed event naming the old and new hashes
// and the actor; a stale base hash is a conflict that changes nothing.
func TestSetApprovals(t *testing.T) {
	home := t.TempDir()
	var events []engine.Event
	publish := func(e engine.Event) { events = append(events, e) }
	f1 := parse(t, `{"version":1,"agents":{"main":{"allowlist":[{"pattern":"/usr/bin/a"}]}}}`)
	c, err := SetApprovals(home, f1, "", "cli:test", publish)
	if err != nil || c.LedgerErr != nil {
		t.Fatalf("first set: %v, ledger %v", err, c.LedgerErr)
	}
	cur, _ := approvals.Load(home)
	if cur.Hash() != c.Hash() {
		t.Fatalf("saved hash %s, reported %s", cur.Hash(), c.Hash())
	}
	f2 := parse(t, `{"version":1,"agents":{"main":{"allowlist":[{"pattern":"/usr/bin/b"}]}}}`)
	if _, err := SetApprovals(home, f2, "stale", "cli:test", publish); !errors.Is(err, approvals.ErrConflict) {
		t.Fatalf("stale base hash: %v", err)
	}
	if _, err := SetApprovals(home, f2, c.Hash(), "api:operator", publish); err != nil {
		t.Fatal(err)
	}
	recs := policyRecords(t, home)
	if len(recs) != 2 || len(events) != 2 {
		t.Fatalf("%d policy records, %d events, want 2 each", len(recs), len(events))
	}
	d := events[1].Data.(map[string]any)
	if events[1].Type != "policy.changed" || d["oldHash"] != c.Hash() || d["newHash"] != f2.Hash() || d["by"] != "api:operator" {
		t.Fatalf("event: %+v", events[1])
	}
	// Without a publisher: the record, no event.
	f3 := parse(t, `{"version":1}`)
	if _, err := SetApprovals(home, f3, f2.Hash(), "gateway", nil); err != nil {
		t.Fatal(err)
	}
	if n := len(policyRecords(t, home)); n != 3 {
		t.Fatalf("%d policy records, want 3", n)
	}
}

// TestImportApprovals: a merge adds the new allowlist entries and records
// the change; a replace takes the imported file as it is.
func TestImportApprovals(t *testing.T) {
	home := t.TempDir()
	SetApprovals(home, parse(t, `{"version":1,"agents":{"main":{"allowlist":[{"pattern":"/usr/bin/a"}]}}}`), "", "t", nil)
	in := parse(t, `{"version":1,"agents":{"main":{"allowlist":[{"pattern":"/usr/bin/a"},{"pattern":"/usr/bin/b"}]}}}`)
	added, c, err := ImportApprovals(home, in, false, "t", nil)
	if err != nil || added != 1 || c.LedgerErr != nil {
		t.Fatalf("merge: added %d, %v, ledger %v", added, err, c.LedgerErr)
	}
	if _, c, err = ImportApprovals(home, parse(t, `{"version":1}`), true, "t", nil); err != nil {
		t.Fatal(err)
	}
	cur, _ := approvals.Load(home)
	if len(cur.Agents) != 0 || cur.Hash() != c.Hash() {
		t.Fatalf("replace kept %v", cur.Agents)
	}
	if n := len(policyRecords(t, home)); n != 3 {
		t.Fatalf("%d policy records, want 3", n)
	}
}

// TestExecDefaultsAndExplain: bad exec defaults are ErrInvalid with the
// operator's message and change nothing; good ones round-trip; explain
// wants a command.
func TestExecDefaultsAndExplain(t *testing.T) {
	home := t.TempDir()
	for _, d := range []engine.ExecDefaults{{Host: "moon"}, {Security: "some"}, {Ask: "sometimes"}} {
		if _, err := SetExecDefaults(home, "main", d); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: %v", d, err)
		}
	}
	if _, err := SetExecDefaults(home, "main", engine.ExecDefaults{Host: "moon"}); err.Error() != `invalid exec default "moon"` {
		t.Fatalf("message: %v", err)
	}
	if d, _ := ExecDefaults(home, "main"); d != (engine.ExecDefaults{}) {
		t.Fatalf("a refused set saved %+v", d)
	}
	want := engine.ExecDefaults{Host: "Gateway", Security: "allowlist", Ask: "on-miss"}
	if _, err := SetExecDefaults(home, "main", want); err != nil {
		t.Fatal(err)
	}
	if d, _ := ExecDefaults(home, "main"); d != want {
		t.Fatalf("saved %+v", d)
	}
	if err := ClearExecDefaults(home, "main"); err != nil {
		t.Fatal(err)
	}
	if d, _ := ExecDefaults(home, "main"); d != (engine.ExecDefaults{}) {
		t.Fatalf("after clear %+v", d)
	}
	if _, err := Explain(home, "", "", "  "); !errors.Is(err, ErrInvalid) {
		t.Fatalf("explain without a command: %v", err)
	}
	x, err := Explain(home, "", home, "echo hi")
	if err != nil || x.Text("main") == "" {
		t.Fatalf("explain: %v", err)
	}
}
