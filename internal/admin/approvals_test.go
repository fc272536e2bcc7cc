package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/store/ledger"
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
	for _, d := range []apitype.ExecDefaults{{Host: "moon"}, {Security: "some"}, {Ask: "sometimes"}} {
		if _, err := SetExecDefaults(home, "main", d); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: %v", d, err)
		}
	}
	if _, err := SetExecDefaults(home, "main", apitype.ExecDefaults{Host: "moon"}); err.Error() != `invalid exec default "moon"` {
		t.Fatalf("message: %v", err)
	}
	if d, _ := ExecDefaults(home, "main"); d != (apitype.ExecDefaults{}) {
		t.Fatalf("a refused set saved %+v", d)
	}
	want := apitype.ExecDefaults{Host: "Gateway", Security: "allowlist", Ask: "on-miss"}
	if _, err := SetExecDefaults(home, "main", want); err != nil {
		t.Fatal(err)
	}
	if d, _ := ExecDefaults(home, "main"); d != want {
		t.Fatalf("saved %+v", d)
	}
	if err := ClearExecDefaults(home, "main"); err != nil {
		t.Fatal(err)
	}
	if d, _ := ExecDefaults(home, "main"); d != (apitype.ExecDefaults{}) {
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

// TestConcurrentApprovalChangesLedgerInFileOrder: concurrent changes of the
// approvals file, by sets (as the API, the CLI and a node do) and imports,
// leave ledger policy records that form one chain in the order of the
// file's versions: each record's oldHash is the previous record's newHash,
// and the last newHash is the file on disk. Generated: writers × rounds,
// each writer retrying on a conflict as a careful client does.
func TestConcurrentApprovalChangesLedgerInFileOrder(t *testing.T) {
	for _, writers := range []int{2, 4, 8} {
		home := t.TempDir()
		const rounds = 6
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range rounds {
					pat := fmt.Sprintf("/usr/bin/w%d-%d", w, i)
					if (w+i)%3 == 0 {
						in := parse(t, fmt.Sprintf(`{"version":1,"agents":{"main":{"allowlist":[{"pattern":%q}]}}}`, pat))
						if _, _, err := ImportApprovals(home, in, false, fmt.Sprintf("import:%d", w), nil); err != nil {
							t.Error(err)
						}
						continue
					}
					for {
						cur, err := approvals.Load(home)
						if err != nil {
							t.Error(err)
							return
						}
						base := cur.Hash()
						added := cur.Import(parse(t, fmt.Sprintf(`{"version":1,"agents":{"main":{"allowlist":[{"pattern":%q}]}}}`, pat)))
						if added != 1 {
							t.Errorf("import added %d", added)
						}
						_, err = SetApprovals(home, cur, base, fmt.Sprintf("set:%d", w), nil)
						if errors.Is(err, approvals.ErrConflict) {
							continue
						}
						if err != nil {
							t.Error(err)
						}
						break
					}
				}
			}()
		}
		wg.Wait()
		recs := policyRecords(t, home)
		if len(recs) != writers*rounds {
			t.Fatalf("%d writers: %d policy records, want %d", writers, len(recs), writers*rounds)
		}
		prev := ""
		for i, r := range recs {
			var p ledger.Policy
			b, _ := json.Marshal(r.Fields)
			json.Unmarshal(b, &p)
			if i > 0 && p.OldHash != prev {
				t.Fatalf("%d writers: record %d (%s) has oldHash %.12s, but the record before it left %.12s: the ledger is not in file order", writers, i, p.By, p.OldHash, prev)
			}
			prev = p.NewHash
		}
		cur, _ := approvals.Load(home)
		if prev != cur.Hash() {
			t.Fatalf("%d writers: last record's newHash %.12s, file %.12s", writers, prev, cur.Hash())
		}
	}
}
