package apitype

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// paramStructs are the structs whose numbers cross a boundary: tool
// arguments and node-link frames. A numeric field without a range tag
// makes Ranges panic, so adding one without a range fails here.
var paramStructs = []any{
	ExecParams{}, ProcessParams{}, PatchParams{}, NodePrepareParams{}, NodeRunParams{},
	NodeSessionParams{}, NodeOutput{}, NodeFinished{}, NodeRunReply{}, NodePlan{}, HTTPQuery{},
}

func TestEveryNumericFieldHasARange(t *testing.T) {
	for _, s := range paramStructs {
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("%T: %v", s, v)
				}
			}()
			rs := Ranges(s)
			// Ranges must see every numeric field (a struct with numbers
			// and no ranges means the walker missed them).
			n := 0
			rt := reflect.TypeOf(s)
			for i := 0; i < rt.NumField(); i++ {
				if isNumeric(rt.Field(i).Type) {
					n++
				}
			}
			if n != len(rs) {
				t.Errorf("%T: %d numeric fields, %d ranges", s, n, len(rs))
			}
		}()
	}
}

// boundary values of a range: each must be accepted (in range) or
// rejected naming the field and its range.
func boundary(r Range) []any {
	vals := []any{r.Min - 1, r.Min, r.Max, r.Max + 1, (r.Min + r.Max) / 2, 1 << 53, math.Pow(2, 63), 5e18, 1e19, 1e300, -1e300,
		1.5, -1, 0, json.RawMessage("-0"), json.RawMessage("1e400"), json.RawMessage("-1e400"), "5", "NaN", "Infinity", "abc", true, nil,
		json.RawMessage("9223372036854775807"), json.RawMessage("18446744073709551616")}
	return vals
}

func inRange(r Range, v float64) bool {
	return !math.IsNaN(v) && v >= r.Min && v <= r.Max && (!r.Int || v == math.Trunc(v))
}

// wantRejected checks e is invalid_argument naming the field (and, for a
// number of the wrong value rather than the wrong type, the range).
func wantRejected(t *testing.T, what string, r Range, e *Error) {
	t.Helper()
	if e == nil {
		t.Errorf("%s: accepted", what)
		return
	}
	if e.Code != CodeInvalidArgument || !strings.Contains(e.Message, `"`+r.Field+`"`) {
		t.Errorf("%s: %s %q, want invalid_argument naming %q", what, e.Code, e.Message, r.Field)
	}
}

func numberOf(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case string:
		var f float64
		if _, err := fmt.Sscan(x, &f); err == nil && x != "NaN" && x != "Infinity" {
			return f, true
		}
	case json.RawMessage:
		var f float64
		if json.Unmarshal(x, &f) == nil {
			return f, true
		}
	}
	return 0, false
}

// TestToolNumbersGenerated sends every boundary value to every numeric
// field of exec and process (each process action that takes it) and
// requires success with the value in range, or invalid_argument naming
// the field.
func TestToolNumbersGenerated(t *testing.T) {
	type tool struct {
		name    string
		base    map[string]any
		parse   func([]byte) (any, *Error)
		actions []string
		strs    bool // numeric strings accepted
	}
	tools := []tool{
		{"exec", map[string]any{"command": "true"}, func(b []byte) (any, *Error) { p, e := ParseExecParams(b); return p, e }, []string{""}, true},
		{"process", map[string]any{"sessionId": "x"}, func(b []byte) (any, *Error) { p, e := ParseProcessParams(b); return p, e }, ProcessActions, false},
	}
	structs := map[string]any{"exec": ExecParams{}, "process": ProcessParams{}}
	checked := 0
	for _, tl := range tools {
		ranges := Ranges(structs[tl.name])
		if tl.name == "exec" {
			ranges = append(ranges, timeoutRange())
			ranges[len(ranges)-1].Field = "timeoutSeconds"
		}
		for _, action := range tl.actions {
			for _, r0 := range ranges {
				if action != "" && !actionUses(action, r0.Field) {
					continue // TestProcessActionFieldsGenerated
				}
				r := r0.For(action)
				for _, v := range boundary(r) {
					args := map[string]any{}
					for k, x := range tl.base {
						args[k] = x
					}
					if action != "" {
						args["action"] = action
					}
					args[r.Field] = v
					b, _ := json.Marshal(args)
					what := fmt.Sprintf("%s %s %s=%s", tl.name, action, r.Field, jsonOf(v))
					got, e := tl.parse(b)
					checked++
					f, isNum := numberOf(v)
					str, isStr := v.(string)
					switch {
					case isStr && !tl.strs && !r.Str:
						// process: numbers only; the message names the
						// range and the unit, and quotes the string.
						wantRejected(t, what, r, e)
						if e != nil && (!strings.Contains(e.Message, "not a string") || !strings.Contains(e.Message, r.String()) ||
							!strings.Contains(e.Message, unitWord(r.Unit)) || !strings.Contains(e.Message, fmt.Sprintf("%q", str))) {
							t.Errorf("%s: message %q does not say a number %s (%s) is expected", what, e.Message, r, unitWord(r.Unit))
						}
					case v == nil:
						if e != nil {
							t.Errorf("%s: null should be absent: %v", what, e)
						}
					case isNum && admissible(r, f):
						if e != nil {
							t.Errorf("%s: in range (or clamped into it) but rejected: %v", what, e)
							continue
						}
						want, note, _ := r.Admit(f)
						gv := fieldValue(got, r.Field)
						if gv == nil || *gv != want {
							t.Errorf("%s: decoded as %v, want %v", what, gv, want)
						}
						if notes := notesOf(got); (note != "") != containsStr(notes, note) || note == "" && len(notes) > 0 && r.Field != "timeout" && r.Field != "timeoutSeconds" {
							t.Errorf("%s: notes %q, want %q", what, notes, note)
						}
					default:
						wantRejected(t, what, r, e)
						if e != nil && isNum && !strings.Contains(e.Message, r.String()) {
							t.Errorf("%s: message %q does not state the range %s", what, e.Message, r)
						}
					}
				}
			}
		}
	}
	if checked < 300 {
		t.Fatalf("only %d cases generated", checked)
	}
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// admissible reports whether v is accepted in r: in range, or a finite
// number within ±MaxSafe for a clamp range.
func admissible(r Range, v float64) bool {
	return inRange(r, v) || r.Clamp && !math.IsNaN(v) && !math.IsInf(v, 0) && math.Abs(v) <= MaxSafe
}

// actionUses reports whether process action reads field.
func actionUses(action, field string) bool {
	return containsStr(ProcessActionFields[action], field)
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// notesOf returns the notes of decoded parameters.
func notesOf(p any) []string {
	switch x := p.(type) {
	case ExecParams:
		return x.Notes
	case ProcessParams:
		return x.Notes
	}
	return nil
}

// fieldValue returns the decoded *float64 of the field with JSON name
// name (timeoutSeconds folds into timeout).
func fieldValue(p any, name string) *float64 {
	if name == "timeoutSeconds" {
		name = "timeout"
	}
	rv := reflect.ValueOf(p)
	for i := 0; i < rv.NumField(); i++ {
		n, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
		if n == name {
			fp, _ := rv.Field(i).Interface().(*float64)
			return fp
		}
	}
	return nil
}

// TestNodeNumbersGenerated decodes node-link frames with every boundary
// value in every numeric field: a value is either refused by the JSON
// decoder, refused by CheckRanges naming the field, or in range.
func TestNodeNumbersGenerated(t *testing.T) {
	for _, s := range []any{NodeRunParams{}, NodeSessionParams{}, NodeOutput{}, NodeFinished{}} {
		for _, r := range Ranges(s) {
			for _, v := range boundary(r) {
				b, _ := json.Marshal(map[string]any{r.Field: v})
				p := reflect.New(reflect.TypeOf(s)).Interface()
				if json.Unmarshal(b, p) != nil {
					continue // the decoder refuses it (type, overflow)
				}
				e := CheckRanges(p, "")
				f, isNum := numberOf(v)
				if v == nil || isNum && inRange(r, f) {
					if e != nil {
						t.Errorf("%T %s=%s: %v", s, r.Field, jsonOf(v), e)
					}
					continue
				}
				// Go's decoder truncates nothing: what it accepts is the
				// number itself, so it must be in range or refused here.
				wantRejected(t, fmt.Sprintf("%T %s=%s", s, r.Field, jsonOf(v)), r, e)
			}
		}
	}
}

func TestNULRejected(t *testing.T) {
	for _, c := range []struct {
		field string
		args  string
	}{
		{"command", `{"command":"echo a\u0000b"}`},
		{"workdir", `{"command":"true","workdir":"/tmp\u0000"}`},
		{"env", `{"command":"true","env":{"A":"x\u0000y"}}`},
		{"env", `{"command":"true","env":{"A\u0000B":"x"}}`},
		{"node", `{"command":"true","node":"n\u0000"}`},
	} {
		_, e := ParseExecParams([]byte(c.args))
		if e == nil || e.Code != CodeInvalidArgument || !strings.Contains(e.Message, `"`+c.field+`"`) {
			t.Errorf("%s: %v", c.args, e)
		}
	}
	for _, c := range []struct {
		field string
		args  string
	}{
		{"sessionId", `{"action":"poll","sessionId":"a\u0000"}`},
		{"path", `{"action":"wait","sessionId":"a","until":"file","path":"x\u0000"}`},
		{"keys", `{"action":"send-keys","sessionId":"a","keys":["a\u0000"]}`},
	} {
		_, e := ParseProcessParams([]byte(c.args))
		if e == nil || e.Code != CodeInvalidArgument || !strings.Contains(e.Message, `"`+c.field+`"`) {
			t.Errorf("%s: %v", c.args, e)
		}
	}
	// Bytes for stdin may hold a NUL.
	if _, e := ParseProcessParams([]byte(`{"action":"write","sessionId":"a","data":"\u0000"}`)); e != nil {
		t.Errorf("write data with NUL: %v", e)
	}
}

// TestRangesDocumented: docs/tools.md lists every numeric tool field
// with exactly its declared range.
func TestRangesDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/tools.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	ts := timeoutRange()
	ts.Field = "timeoutSeconds"
	rows := []string{DocRow("exec", ts)}
	for _, r := range Ranges(ExecParams{}) {
		rows = append(rows, DocRow("exec", r))
	}
	for _, r := range Ranges(ProcessParams{}) {
		rows = append(rows, DocRow("process", r))
	}
	for _, row := range rows {
		if !strings.Contains(doc, row+"\n") {
			t.Errorf("docs/tools.md lacks the row\n%s", row)
		}
	}
}
