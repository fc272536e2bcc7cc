package ledger

import (
	"strings"
	"testing"
)

// TestVerifyReportsOpenSessions: a session whose exec record has no end
// record is reported open, by id, in the report and its text; an end
// record closes it; open sessions do not fail the ledger.
func TestVerifyReportsOpenSessions(t *testing.T) {
	home := t.TempDir()
	l, err := Open(home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{
		{Type: TypeExec, Agent: "main", Fields: Exec{SessionID: "s1", Argv: []string{"true"}}},
		{Type: TypeExec, Agent: "main", Fields: Exec{SessionID: "s2", Argv: []string{"true"}}},
		{Type: TypeEnd, Agent: "main", Fields: End{SessionID: "s1", State: "exited"}},
		{Type: TypeExec, Agent: "main", Fields: Exec{SessionID: "s3", Argv: []string{"true"}}},
	} {
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	rep, err := Verify(home)
	if err != nil || !rep.OK {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	if rep.OpenCount != 2 || len(rep.Open) != 2 || rep.Open[0].SessionID != "s2" || rep.Open[0].Seq != 2 || rep.Open[1].SessionID != "s3" {
		t.Fatalf("open: %d %+v, want s2 (seq 2) and s3", rep.OpenCount, rep.Open)
	}
	if !strings.HasSuffix(rep.String(), "; 2 sessions open") {
		t.Fatalf("text %q does not say 2 sessions are open", rep.String())
	}
	if d := strings.Join(rep.Details(), "\n"); !strings.Contains(d, "open s2 (exec at seq 2") || !strings.Contains(d, "open s3") {
		t.Fatalf("details %q do not list the open sessions", d)
	}
}
