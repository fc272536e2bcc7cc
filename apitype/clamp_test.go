package apitype

import (
	"os"
	"strings"
	"testing"
)

// TestReferenceValuesAccepted: the values OpenClaw's tools clamp or take
// (a turn lost for a client each time conch refused one) are accepted,
// clamped as the reference says, with a note naming the field; what is
// not a number, or overflows, is still refused.
func TestReferenceValuesAccepted(t *testing.T) {
	for _, c := range []struct {
		tool, args, field string
		want              float64
		note              string // in the notes ("" none)
	}{
		{"exec", `{"command":"true","yieldMs":-5}`, "yieldMs", 0, "yieldMs -5 is outside [0, 120000]; used 0"},
		{"exec", `{"command":"true","yieldMs":"500"}`, "yieldMs", 500, ""},
		{"exec", `{"command":"true","timeout":-1}`, "timeout", 0, "timeout -1 is outside"},
		{"exec", `{"command":"true","timeoutSeconds":-1}`, "timeout", 0, "timeoutSeconds -1 is outside"},
		{"exec", `{"command":"true","timeout":30000}`, "timeout", 30000, "timeout 30000 is in seconds (8 h 20 min); if milliseconds were meant, send 30."},
		{"exec", `{"command":"true","timeout":10800}`, "timeout", 10800, ""},
		{"process", `{"action":"poll","sessionId":"s","timeout":-100}`, "timeout", 0, "timeout -100 is outside [0, 120000]; used 0 milliseconds."},
		{"process", `{"action":"poll","sessionId":"s","timeout":500000}`, "timeout", 120000, "used 120000"},
		{"process", `{"action":"poll","sessionId":"s","timeout":"300"}`, "timeout", 300, ""},
		{"process", `{"action":"wait","sessionId":"s","timeout":"300"}`, "timeout", 300, ""},
		{"process", `{"action":"log","sessionId":"s","offset":-5}`, "offset", 0, "offset -5 is outside"},
		{"process", `{"action":"log","sessionId":"s","offset":2.7}`, "offset", 2, "offset 2.7 is not an integer; used 2 lines."},
		{"process", `{"action":"log","sessionId":"s","limit":-3.5}`, "limit", 0, "limit -3.5 is not an integer and outside"},
		{"process", `{"action":"poll","sessionId":"s","since":-1}`, "since", 0, "since -1"},
		{"process", `{"action":"search","sessionId":"s","pattern":"x","max":5000}`, "max", 1000, "max 5000"},
	} {
		var got any
		var e *Error
		if c.tool == "exec" {
			got, e = ParseExecParams([]byte(c.args))
		} else {
			got, e = ParseProcessParams([]byte(c.args))
		}
		if e != nil {
			t.Errorf("%s %s: refused: %v", c.tool, c.args, e)
			continue
		}
		if v := fieldValue(got, c.field); v == nil || *v != c.want {
			t.Errorf("%s %s: %s = %v, want %v", c.tool, c.args, c.field, v, c.want)
		}
		notes := strings.Join(notesOf(got), "\n")
		if c.note == "" && notes != "" || !strings.Contains(notes, c.note) {
			t.Errorf("%s %s: notes %q, want %q", c.tool, c.args, notes, c.note)
		}
	}
	for _, args := range []string{
		`{"command":"true","timeout":1e300}`, `{"command":"true","yieldMs":"NaN"}`, `{"command":"true","timeout":"abc"}`,
		`{"command":"true","timeout":1e400}`, `{"command":"true","yieldMs":true}`,
	} {
		if _, e := ParseExecParams([]byte(args)); e == nil || e.Code != CodeInvalidArgument {
			t.Errorf("exec %s: %v, want invalid_argument", args, e)
		}
	}
	for _, args := range []string{
		`{"action":"log","sessionId":"s","offset":"5"}`, `{"action":"log","sessionId":"s","offset":1e19}`,
		`{"action":"wait","sessionId":"s","until":"port","port":70000}`, `{"action":"poll","sessionId":"s","timeout":"30s"}`,
	} {
		if _, e := ParseProcessParams([]byte(args)); e == nil || e.Code != CodeInvalidArgument {
			t.Errorf("process %s: %v, want invalid_argument", args, e)
		}
	}
}

// TestSubmitTakesData: submit reads data (the line before the Enter),
// and an action that would ignore a field refuses it.
func TestSubmitTakesData(t *testing.T) {
	p, e := ParseProcessParams([]byte(`{"action":"submit","sessionId":"s","data":"ls"}`))
	if e != nil || p.Data != "ls" {
		t.Errorf("submit with data: %+v %v", p, e)
	}
	_, e = ParseProcessParams([]byte(`{"action":"kill","sessionId":"s","data":"ls"}`))
	if e == nil || !strings.Contains(e.Message, `"data"`) || !strings.Contains(e.Message, "kill") {
		t.Errorf("kill with data: %v, want refused naming data and kill", e)
	}
}

// TestActionFieldsDocumented: the "used by" column of docs/tools.md's
// process input table is ProcessActionFields, field by field.
func TestActionFieldsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/tools.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "| field | type | used by | notes |")
	if i < 0 {
		t.Fatal("docs/tools.md: no process input table")
	}
	documented := map[string]map[string]bool{}
	for _, line := range strings.Split(doc[i:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "/"), "|")
		if len(cells) < 5 {
			continue
		}
		users := map[string]bool{}
		switch u := strings.TrimSpace(cells[3]); u {
		case "all":
			continue // action itself
		case "all but `list`":
			for _, a := range ProcessActions[1:] {
				users[a] = true
			}
		default:
			for _, a := range strings.Split(u, ",") {
				users[strings.TrimSpace(a)] = true
			}
		}
		for _, f := range strings.Split(cells[1], ",") {
			documented[strings.Trim(strings.TrimSpace(f), "`")] = users
		}
	}
	for f := range processFields {
		if f == "action" {
			continue
		}
		want := map[string]bool{}
		for _, a := range ProcessActions {
			if actionUses(a, f) {
				want[a] = true
			}
		}
		got, ok := documented[f]
		if !ok {
			t.Errorf("docs/tools.md: no row for process field %q", f)
			continue
		}
		for a := range want {
			if !got[a] {
				t.Errorf("docs/tools.md: %q used by %s is not documented", f, a)
			}
		}
		for a := range got {
			if !want[a] {
				t.Errorf("docs/tools.md: %q documented for %s, which does not read it", f, a)
			}
		}
	}
}
