package ledger

import (
	"strings"
	"testing"
	"time"
)

// TestRecordStringSaysObserved: `conch ledger tail` shows that an end was
// recorded after the fact (by a later engine, from the supervisor's
// files), as the record says, and prints no empty list (persisted=).
func TestRecordStringSaysObserved(t *testing.T) {
	ts := time.Unix(0, 0)
	end := Record{Seq: 3, TS: ts, Type: TypeEnd, Agent: "main",
		Fields: map[string]any{"sessionId": "s1", "state": "exited", "exitCode": 0, "observed": true}}
	if got := end.String(); !strings.Contains(got, "observed after the fact") {
		t.Errorf("an observed end: %q", got)
	}
	end.Fields = map[string]any{"sessionId": "s1", "state": "exited", "exitCode": 0}
	if got := end.String(); strings.Contains(got, "observed") {
		t.Errorf("an end recorded when it happened: %q", got)
	}
	dec := Record{Seq: 4, TS: ts, Type: TypeDecision, Agent: "main",
		Fields: map[string]any{"decision": "dropped", "decidedBy": "engine", "approvalId": "a", "persisted": []any{}}}
	if got := dec.String(); strings.Contains(got, "persisted") {
		t.Errorf("an empty list is printed: %q", got)
	}
}
