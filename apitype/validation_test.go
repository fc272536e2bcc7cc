package apitype

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// The tests of this file generate the classes of bad input for every
// field of every tool's parameter struct, found by reflection: wrong JSON
// types, numbers outside or at the edge of their ranges, values outside
// an enum, unknown and duplicated members, very long strings, invalid
// UTF-8. Each member must be refused with invalid_argument naming the
// field, or accepted with a value that satisfies the field's rules, and
// never panic. A field the walker cannot classify fails the test, so a new
// field needs a tag or a rule here.

// paramTool is one tool's parameters: its struct, its decoder and a
// minimal valid call.
type paramTool struct {
	name    string
	typ     reflect.Type
	known   map[string]bool   // the decoder's member names
	aliases map[string]string // extra member name → field it folds into
	parse   func([]byte) (any, *Error)
	base    map[string]any
	actions []string // process: the per-action ranges to try
	numStrs bool     // numeric strings accepted
	// special names fields with rules of their own, checked by the
	// tool's own tests (required, pattern, exact match).
	special map[string]string
}

func paramTools() []paramTool {
	return []paramTool{
		{
			name: "exec", typ: reflect.TypeOf(ExecParams{}), known: execFields,
			aliases: map[string]string{"timeoutSeconds": "timeout"},
			parse:   func(b []byte) (any, *Error) { p, e := ParseExecParams(b); return p, e },
			base:    map[string]any{"command": "true"}, actions: []string{""}, numStrs: true,
			special: map[string]string{"command": "required", "idempotencyKey": "pattern"},
		},
		{
			name: "process", typ: reflect.TypeOf(ProcessParams{}), known: processFields,
			parse: func(b []byte) (any, *Error) { p, e := ParseProcessParams(b); return p, e },
			base:  map[string]any{"action": "poll", "sessionId": "s1"}, actions: ProcessActions,
			special: map[string]string{"action": "action", "until": "stringOrArray"},
		},
		{
			name: "apply_patch", typ: reflect.TypeOf(PatchParams{}), known: map[string]bool{"input": true},
			parse: func(b []byte) (any, *Error) { p, e := ParsePatchParams(b); return p, e },
			base:  map[string]any{"input": "*** Begin Patch\n*** End Patch"}, actions: []string{""},
			special: map[string]string{"input": "required"},
		},
	}
}

// derivedFields are fields that no member sets directly.
var derivedFields = map[string]bool{"ProcessParams.UntilArray": true, "ProcessParams.Notes": true, "ExecParams.Notes": true}

// fieldClass is how a field is validated, derived from its type and tags.
func fieldClass(f reflect.StructField) string {
	switch {
	case f.Tag.Get("range") != "" && f.Type == reflect.TypeOf((*float64)(nil)):
		return "number"
	case f.Type == reflect.TypeOf((*bool)(nil)):
		return "bool"
	case f.Type.Kind() == reflect.String && f.Tag.Get("enum") != "":
		return "enum"
	case f.Type.Kind() == reflect.String:
		return "string"
	case f.Type == reflect.TypeOf(map[string]string{}):
		return "strmap"
	case f.Type == reflect.TypeOf([]string{}):
		return "strings"
	}
	return ""
}

type paramField struct {
	json, class, special string
	f                    reflect.StructField
	rng                  Range // numbers
	enum                 []string
}

// walkFields classifies every field of tl's struct and checks that the
// struct and the decoder's list of members agree.
func walkFields(t testing.TB, tl paramTool) []paramField {
	t.Helper()
	var out []paramField
	names := map[string]bool{}
	for i := 0; i < tl.typ.NumField(); i++ {
		f := tl.typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || name == "" {
			if !derivedFields[tl.typ.Name()+"."+f.Name] {
				t.Errorf("%s.%s has no JSON name and is not a known derived field", tl.typ.Name(), f.Name)
			}
			continue
		}
		names[name] = true
		pf := paramField{json: name, class: fieldClass(f), special: tl.special[name], f: f}
		if pf.class == "" {
			t.Errorf("%s.%s (%s): no validation class: give it a range or enum tag, or a rule in validation_test.go", tl.typ.Name(), f.Name, f.Type)
			continue
		}
		if pf.class == "number" {
			r, err := ParseRange(name, f.Tag.Get("range"))
			if err != nil {
				t.Fatal(err)
			}
			pf.rng = r
		}
		if pf.class == "enum" {
			pf.enum = strings.Split(f.Tag.Get("enum"), ",")
		}
		out = append(out, pf)
	}
	for alias, to := range tl.aliases {
		for _, pf := range out {
			if pf.json == to {
				pf.json = alias
				pf.rng.Field = alias
				out = append(out, pf)
				break
			}
		}
		names[alias] = true
	}
	for n := range tl.known {
		if !names[n] {
			t.Errorf("%s: the decoder knows %q, which no field carries", tl.name, n)
		}
	}
	for n := range names {
		if !tl.known[n] {
			t.Errorf("%s: field %q is not among the decoder's members", tl.name, n)
		}
	}
	for n := range tl.special {
		if !names[n] {
			t.Errorf("%s: special rule for %q, which is not a field", tl.name, n)
		}
	}
	return out
}

// TestParamFieldsClassified: every field of every tool has a validation
// class, and the structs and the decoders' member lists agree.
func TestParamFieldsClassified(t *testing.T) {
	n := 0
	for _, tl := range paramTools() {
		n += len(walkFields(t, tl))
	}
	if n < 40 {
		t.Fatalf("only %d fields walked", n)
	}
}

// verdict is what a generated value must get.
type verdict int

const (
	accept  verdict = iota // accepted (and, for numbers, decoded as the value)
	reject                 // invalid_argument naming the field
	either                 // either, checked by the invariants
	badJSON                // not JSON at all: "Invalid arguments: …"
)

type member struct {
	raw  string // JSON text of the value
	want verdict
	note string
}

func wrongTypes(class string) []member {
	all := map[string]string{
		"string": `"x"`, "number": `5`, "bool": `true`, "object": `{}`, "objectS": `{"a":"b"}`,
		"array": `[]`, "arrayS": `["a"]`, "arrayN": `[1]`, "false": `false`, "zero": `0`,
	}
	ok := map[string][]string{
		"string":        {"string"},
		"enum":          {},
		"number":        {"number", "zero"},
		"bool":          {"bool", "false"},
		"strmap":        {"object", "objectS"},
		"strings":       {"array", "arrayS"},
		"stringOrArray": {"string", "array", "arrayS"},
	}[class]
	var out []member
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fine := false
		for _, o := range ok {
			fine = fine || o == k
		}
		if !fine && !(class == "enum" && (k == "string")) {
			out = append(out, member{all[k], reject, "wrong type " + k})
		}
	}
	return out
}

func rawString(s string) string { b, _ := json.Marshal(s); return string(b) }

// members generates the values to try for one field (and one process
// action).
func members(tl paramTool, pf paramField, action string) []member {
	class := pf.class
	if pf.special == "stringOrArray" {
		class = "stringOrArray"
	}
	ms := wrongTypes(class)
	ms = append(ms, member{`null`, accept, "null is absent"})
	long := strings.Repeat("x", 1<<20)
	switch class {
	case "string":
		ms = append(ms, member{`"x"`, accept, ""}, member{`""`, accept, "empty"},
			member{rawString(long), either, "1 MiB"},
			member{"\"a\xff\xfeb\"", either, "invalid UTF-8"},
			member{`"\ud800"`, either, "lone surrogate"},
			member{`"\u00e9\u4e16"`, accept, "unicode"})
	case "enum":
		for _, v := range pf.enum {
			ms = append(ms, member{rawString(v), accept, "enum value"},
				member{rawString(strings.ToUpper(v)), accept, "enum, upper case"},
				member{rawString(" " + v + "\t"), accept, "enum, padded"},
				member{rawString(v + "\x00"), reject, "enum + NUL"},
				member{rawString(v + "x"), reject, "enum + x"},
				member{rawString(strings.Repeat("Ｘ", 1) + v), reject, "fullwidth prefix"})
		}
		ms = append(ms, member{`""`, accept, "empty is absent"}, member{`"  "`, reject, "blank"},
			member{`"bogus"`, reject, "unknown"}, member{rawString(strings.Join(pf.enum, ",")), reject, "list"},
			member{rawString(long), reject, "1 MiB"}, member{"\"\xff\"", reject, "invalid UTF-8"},
			member{`"gatew\u0430y"`, reject, "Cyrillic a"})
	case "bool":
		ms = append(ms, member{`true`, accept, ""}, member{`false`, accept, ""},
			member{`"true"`, reject, "string"}, member{`1`, reject, "number"}, member{`0`, reject, "zero"})
	case "strmap":
		ms = append(ms, member{`{"A":"1","B_2":""}`, accept, ""},
			member{`{"A":1}`, reject, "number value"}, member{`{"A":true}`, reject, "bool value"},
			member{`{"A":{}}`, reject, "object value"}, member{`{"A":["x"]}`, reject, "array value"},
			member{`{"A":null}`, reject, "null value"},
			member{`{"A":"1","A":"2"}`, reject, "duplicate key"},
			member{`{"A":"` + long + `"}`, either, "1 MiB value"},
			member{"{\"A\":\"\xff\"}", either, "invalid UTF-8"})
	case "strings", "stringOrArray":
		ms = append(ms, member{`["a","b"]`, accept, ""},
			member{`[1]`, reject, "number element"}, member{`[null]`, reject, "null element"},
			member{`["a",null]`, reject, "null element"}, member{`[["a"]]`, reject, "nested"},
			member{`[{}]`, reject, "object element"}, member{`[true]`, reject, "bool element"},
			member{`["` + long + `"]`, either, "1 MiB element"},
			member{"[\"\xff\"]", either, "invalid UTF-8"})
		if class == "stringOrArray" {
			ms = append(ms, member{`"a"`, accept, "one string"})
		}
	case "number":
		r := pf.rng.For(action)
		num := func(f float64) string { return fmtNum(f) }
		in := func(f float64) verdict {
			if admissible(r, f) {
				return accept
			}
			return reject
		}
		for _, f := range []float64{r.Min, r.Max, r.Min - 1, r.Max + 1, math.Nextafter(r.Max, math.Inf(1)),
			math.Nextafter(r.Min, math.Inf(-1)), r.Min + 0.5, -1, 0, 1, 1e308, -1e308, 5e-324, math.MaxInt64, -math.MaxInt64,
			1 << 53, 1<<53 + 2, 1e19} {
			ms = append(ms, member{num(f), in(f), "number"})
		}
		ms = append(ms, member{`-0`, in(0), "-0"}, member{`0.0`, in(0), "0.0"}, member{`1e400`, reject, "beyond float64"},
			member{`-1e400`, reject, "beyond float64"}, member{`1e-400`, in(0), "underflows to 0"},
			member{`1E2`, in(100), "exponent"}, member{`100000000000000000000000000000000`, reject, "huge integer"},
			member{`NaN`, badJSON, "bare NaN"}, member{`Infinity`, badJSON, "bare Infinity"},
			member{`0x10`, badJSON, "hex"}, member{`+1`, badJSON, "plus"}, member{`01`, badJSON, "leading zero"},
			member{`.5`, badJSON, "leading dot"})
		strs := []struct {
			s  string
			f  float64
			ok bool
		}{{"NaN", 0, false}, {"nan", 0, false}, {"Inf", 0, false}, {"+Inf", 0, false}, {"-Infinity", 0, false},
			{"infinity", 0, false}, {"1e400", 0, false}, {"", 0, false}, {"abc", 0, false}, {"30s", 0, false},
			{"1_000", 0, false}, {" 5 ", 5, true}, {"5", 5, true}, {"-0", 0, true}, {fmtNum(r.Max), r.Max, true},
			{fmtNum(r.Max + 1), r.Max + 1, true}, {fmtNum(r.Min - 1), r.Min - 1, true}, {"0.5", 0.5, true}}
		for _, s := range strs {
			v := reject
			if (tl.numStrs || r.Str) && s.ok {
				v = in(s.f)
			}
			ms = append(ms, member{rawString(s.s), v, "numeric string"})
		}
		ms = append(ms, member{rawString("0x1p4"), reject, "hex float string"}, member{rawString("+5"), either, "plus"})
	}
	return ms
}

// parseSafe runs parse, turning a panic into a test failure.
func parseSafe(t *testing.T, what string, parse func([]byte) (any, *Error), b []byte) (v any, e *Error, ok bool) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s: panic: %v", what, p)
			ok = false
		}
	}()
	v, e = parse(b)
	return v, e, true
}

// object builds the JSON text of base with field set to raw (raw "" drops
// it), keeping member order stable.
func object(base map[string]any, field, raw string) []byte {
	var parts []string
	keys := make([]string, 0, len(base))
	for k := range base {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == field {
			continue
		}
		v, _ := json.Marshal(base[k])
		parts = append(parts, rawString(k)+":"+string(v))
	}
	if raw != "" {
		parts = append(parts, rawString(field)+":"+raw)
	}
	return []byte("{" + strings.Join(parts, ",") + "}")
}

// namesField checks that e is an argument error naming field.
func namesField(e *Error, field string) bool {
	return e != nil && e.Code == CodeInvalidArgument && strings.Contains(e.Message, field)
}

func shortRaw(s string) string {
	if len(s) > 40 {
		return s[:20] + fmt.Sprintf("…(%d bytes)…", len(s)) + s[len(s)-10:]
	}
	return s
}

// TestParamsGenerated sends every generated member of every field of
// every tool (every process action for numbers) and checks the verdict
// and the invariants of what is accepted.
func TestParamsGenerated(t *testing.T) {
	checked := 0
	for _, tl := range paramTools() {
		for _, pf := range walkFields(t, tl) {
			actions := []string{tl.actions[0]}
			if pf.class == "number" {
				actions = tl.actions
			}
			if tl.name == "process" && pf.special != "action" {
				// Each action that reads the field; the others refuse
				// it (TestProcessActionFieldsGenerated).
				var using []string
				for _, a := range actions {
					if actionUses(a, pf.json) {
						using = append(using, a)
					}
				}
				if len(using) == 0 {
					for _, a := range tl.actions {
						if actionUses(a, pf.json) {
							using = []string{a}
							break
						}
					}
				}
				actions = using
			}
			for _, action := range actions {
				base := map[string]any{}
				for k, v := range tl.base {
					base[k] = v
				}
				if action != "" {
					base["action"] = action
				}
				for _, m := range members(tl, pf, action) {
					want := m.want
					if pf.special == "required" && (m.raw == `null` || m.raw == `""`) {
						want = either // "Provide a command to start." / "Provide a patch input."
					}
					if pf.special == "action" && m.want == accept && m.raw != `null` && !isAction(m.raw) {
						want = reject
					}
					if pf.special == "action" && m.raw == `null` {
						want = reject // action is required
					}
					if pf.special == "pattern" && (m.want == accept || m.want == either) && m.raw != `null` {
						want = either // checked by its own regular expression
					}
					what := fmt.Sprintf("%s %s=%s (%s, action %q)", tl.name, pf.json, shortRaw(m.raw), m.note, action)
					v, e, ok := parseSafe(t, what, tl.parse, object(base, pf.json, m.raw))
					checked++
					if !ok {
						continue
					}
					switch {
					case want == badJSON:
						if e == nil || e.Code != CodeInvalidArgument || !strings.HasPrefix(e.Message, "Invalid arguments: expected a JSON object") {
							t.Errorf("%s: %v, want the invalid-JSON error", what, e)
						}
					case want == accept && e != nil:
						t.Errorf("%s: refused: %s %q", what, e.Code, e.Message)
					case want == reject && e == nil:
						t.Errorf("%s: accepted", what)
					case e != nil && pf.special != "required" && !namesField(e, pf.json):
						t.Errorf("%s: %s %q does not name the field", what, e.Code, e.Message)
					case e != nil && pf.special == "required" && e.Code != CodeInvalidArgument && e.Code != CodeInvalidPatch:
						t.Errorf("%s: code %s", what, e.Code)
					case e == nil:
						checkAccepted(t, what, tl, pf, action, m.raw, v)
					}
				}
			}
		}
	}
	if checked < 1200 {
		t.Fatalf("only %d members generated", checked)
	}
}

func isAction(raw string) bool {
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return false
	}
	for _, a := range ProcessActions {
		if strings.TrimSpace(s) == a {
			return true
		}
	}
	return false
}

// checkAccepted checks the invariants of an accepted value: numbers are
// finite and in range (the value sent, when a JSON number), enums hold a
// listed value, no string holds invalid UTF-8.
func checkAccepted(t *testing.T, what string, tl paramTool, pf paramField, action, raw string, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	fv := rv.FieldByName(pf.f.Name)
	switch {
	case pf.class == "number" && raw != "":
		if raw == "null" {
			if !fv.IsNil() && pf.json != "timeoutSeconds" {
				t.Errorf("%s: null decoded as %v", what, fv.Elem())
			}
			return
		}
		if fv.IsNil() {
			t.Errorf("%s: accepted but not set", what)
			return
		}
		f := fv.Elem().Float()
		if !inRange(pf.rng.For(action), f) {
			t.Errorf("%s: accepted %v outside %s", what, f, pf.rng.For(action))
		}
		var sent float64
		if json.Unmarshal([]byte(raw), &sent) == nil {
			if want, _, _ := pf.rng.For(action).Admit(sent); want != f {
				t.Errorf("%s: decoded as %v, want %v", what, f, want)
			}
		}
	case pf.class == "enum":
		s := fv.String()
		okv := s == ""
		for _, a := range pf.enum {
			okv = okv || s == a
		}
		if !okv {
			t.Errorf("%s: enum holds %q", what, s)
		}
	}
	// A member that was accepted with a value reached its field (a field
	// the decoder forgot would stay zero).
	if raw != "" && raw != "null" && raw != `""` && raw != "[]" && raw != "{}" && fv.IsZero() && pf.json != "timeoutSeconds" {
		t.Errorf("%s: accepted but the field is still zero", what)
	}
	var walk func(x reflect.Value)
	walk = func(x reflect.Value) {
		switch x.Kind() {
		case reflect.String:
			if !utf8.ValidString(x.String()) {
				t.Errorf("%s: invalid UTF-8 passed the decoder", what)
			}
		case reflect.Slice:
			for i := 0; i < x.Len(); i++ {
				walk(x.Index(i))
			}
		case reflect.Map:
			for it := x.MapRange(); it.Next(); {
				walk(it.Key())
				walk(it.Value())
			}
		}
	}
	walk(fv)
}

// TestParamsMembersGenerated: for every tool, member names that are not
// fields (case variants, suffixes, empty, invisible characters) are
// refused naming the member, and every member sent twice is refused
// naming it (a JSON object with a repeated name has no one meaning: a
// reader that keeps the first value and conch, which would keep the last,
// would see different calls).
func TestParamsMembersGenerated(t *testing.T) {
	for _, tl := range paramTools() {
		fields := walkFields(t, tl)
		for _, pf := range fields {
			for _, k := range []string{strings.ToUpper(pf.json[:1]) + pf.json[1:], strings.ToUpper(pf.json), pf.json + " ",
				" " + pf.json, pf.json + "\u200b", pf.json + "s", pf.json[:len(pf.json)-1], strings.ReplaceAll(pf.json, "", "")} {
				if tl.known[k] {
					continue
				}
				b := object(tl.base, k, `"x"`)
				what := fmt.Sprintf("%s member %q", tl.name, k)
				_, e, ok := parseSafe(t, what, tl.parse, b)
				if ok && (e == nil || e.Code != CodeInvalidArgument || !strings.Contains(e.Message, fmt.Sprintf("%q", k))) {
					t.Errorf("%s: %v, want Unknown parameter naming it", what, e)
				}
			}
			// The same member twice, with equal and with different values.
			val := map[string][2]string{"number": {`1`, `2`}, "bool": {`true`, `false`}, "string": {`"a"`, `"b"`},
				"strmap": {`{}`, `{"A":"b"}`}, "strings": {`["a"]`, `["b"]`}}[pf.class]
			if pf.class == "enum" {
				val = [2]string{rawString(pf.enum[0]), rawString(pf.enum[len(pf.enum)-1])}
			}
			if pf.special == "action" {
				val = [2]string{`"poll"`, `"kill"`}
			}
			for _, second := range val {
				b := object(tl.base, pf.json, val[0])
				b = append(b[:len(b)-1], []byte(","+rawString(pf.json)+":"+second+"}")...)
				what := fmt.Sprintf("%s %s", tl.name, b)
				_, e, ok := parseSafe(t, what, tl.parse, b)
				if ok && !namesField(e, pf.json) {
					t.Errorf("%s: %v, want a duplicate error naming %q", what, e, pf.json)
				}
			}
		}
		for _, k := range []string{"", "__proto__", "constructor", "\u00e9"} {
			_, e, ok := parseSafe(t, tl.name+" "+k, tl.parse, object(tl.base, k, `1`))
			if ok && (e == nil || !strings.Contains(e.Message, fmt.Sprintf("%q", k))) {
				t.Errorf("%s member %q: %v", tl.name, k, e)
			}
		}
	}
}

// TestParamsNotObjects: arguments that are not one JSON object are
// refused; empty and null are an empty object.
func TestParamsNotObjects(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	for _, tl := range paramTools() {
		for _, raw := range []string{`[]`, `"x"`, `1`, `true`, `{`, `{"a":}`, `{}{}`, `{} x`, `[{}]`, "\xff", deep,
			`{"` + walkFieldsQuiet(tl)[0] + `":` + deep + `}`} {
			what := fmt.Sprintf("%s %s", tl.name, shortRaw(raw))
			_, e, ok := parseSafe(t, what, tl.parse, []byte(raw))
			if ok && (e == nil || e.Code != CodeInvalidArgument) {
				t.Errorf("%s: %v", what, e)
			}
		}
		for _, raw := range []string{``, `null`, ` `, `{}`} {
			_, e, _ := parseSafe(t, tl.name+" "+raw, tl.parse, []byte(raw))
			// Absent arguments: only a missing required field is an error.
			if e != nil && e.Code != CodeInvalidArgument && e.Code != CodeInvalidPatch {
				t.Errorf("%s %q: %v", tl.name, raw, e)
			}
		}
	}
}

func walkFieldsQuiet(tl paramTool) []string {
	var out []string
	for n := range tl.known {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// FuzzParseParams decodes arbitrary bytes as the arguments of every tool
// and checks the invariants: no panic; an error is an argument error; an
// accepted call has every number finite and in its range, every enum
// one of its values, no invalid UTF-8 and no NUL where none may be.
//
//	go test ./apitype -run '^$' -fuzz FuzzParseParams -fuzztime 1m
func FuzzParseParams(f *testing.F) {
	for _, s := range []string{`{"command":"true","env":{"A":"1"},"timeout":"5","host":"GATEWAY"}`,
		`{"action":"wait","sessionId":"s","until":["port","idle"],"port":80,"idleMs":100}`,
		`{"action":"poll","sessionId":"s","timeout":120000}`, `{"input":"*** Begin Patch\n*** End Patch"}`,
		`{"command":"a","command":"b"}`, `{"command":"x","env":{"A":"1","A":"2"}}`, `{"action":"send-keys","keys":[null]}`,
		`{"command":"x","yieldMs":1e400}`, `{"command":"x","timeout":"0x1p4"}`, "{\"command\":\"\xff\"}"} {
		f.Add(s)
	}
	tools := paramTools()
	fields := map[string][]paramField{}
	for _, tl := range tools {
		fields[tl.name] = walkFields(t0{}, tl)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, tl := range tools {
			v, e, ok := parseSafe(t, tl.name+" "+raw, tl.parse, []byte(raw))
			if !ok {
				continue
			}
			if e != nil {
				if e.Code != CodeInvalidArgument && e.Code != CodeInvalidPatch {
					t.Errorf("%s %q: code %s", tl.name, raw, e.Code)
				}
				continue
			}
			action := ""
			if p, ok := v.(ProcessParams); ok {
				action = p.Action
			}
			rv := reflect.ValueOf(v)
			for _, pf := range fields[tl.name] {
				if pf.json == "timeoutSeconds" {
					continue
				}
				fv := rv.FieldByName(pf.f.Name)
				if pf.class == "number" && !fv.IsNil() && !inRange(pf.rng.For(action), fv.Elem().Float()) {
					t.Errorf("%s %q: %s=%v outside %s", tl.name, raw, pf.json, fv.Elem().Float(), pf.rng.For(action))
				}
				checkAccepted(t, tl.name+" "+raw, tl, pf, action, "", v)
			}
			if e := CheckStrings(v); tl.name != "apply_patch" && e != nil {
				t.Errorf("%s %q: accepted with %v", tl.name, raw, e)
			}
		}
	})
}

// t0 is a testing.TB for walkFields outside a test (the fuzz setup).
type t0 struct{ testing.TB }

func (t0) Helper()                        {}
func (t0) Errorf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
func (t0) Fatal(a ...any)                 { panic(fmt.Sprint(a...)) }

// TestProcessActionFieldsGenerated sends every process field to every
// action: an action that reads the field takes it (or refuses its value
// for a reason of its own, naming the field), one that does not refuses a
// value naming the field and the action, so nothing sent is dropped
// without a word; the field's zero value changes nothing and passes.
func TestProcessActionFieldsGenerated(t *testing.T) {
	samples := map[string]string{ // a valid, non-zero value of each field
		"sessionId": `"s1"`, "data": `"y"`, "eof": `true`, "keys": `["Enter"]`, "hex": `["0d"]`,
		"literal": `"x"`, "delayMs": `5`, "text": `"t"`, "bracketed": `true`, "offset": `1`,
		"limit": `1`, "since": `1`, "raw": `true`, "stream": `"stdout"`, "timeout": `5`,
		"until": `"exit"`, "pattern": `"x"`, "ignoreCase": `true`, "host": `"h"`, "port": `80`,
		"url": `"http://x"`, "path": `"p"`, "idleMs": `100`, "context": `1`, "max": `1`,
	}
	zeros := map[string]string{"string": `""`, "bool": `false`, "number": `0`, "strings": `[]`, "stringOrArray": `[]`, "enum": `""`}
	tl := paramTools()[1]
	fields := walkFields(t, tl)
	for _, a := range ProcessActions {
		for _, f := range ProcessActionFields[a] {
			if !processFields[f] {
				t.Errorf("ProcessActionFields[%s] names %q, not a process field", a, f)
			}
		}
	}
	for _, pf := range fields {
		if pf.json == "action" {
			continue
		}
		raw, ok := samples[pf.json]
		if !ok {
			t.Errorf("no sample value for process field %q", pf.json)
			continue
		}
		used := false
		for _, a := range ProcessActions {
			uses := actionUses(a, pf.json)
			used = used || uses
			base := map[string]any{"action": a}
			what := fmt.Sprintf("process %s %s=%s", a, pf.json, raw)
			_, e := ParseProcessParams(object(base, pf.json, raw))
			switch {
			case uses && e != nil && !namesField(e, pf.json):
				t.Errorf("%s: refused without naming the field: %v", what, e)
			case uses && e != nil && strings.Contains(e.Message, "does not apply"):
				t.Errorf("%s: %s reads %s, but it was refused: %v", what, a, pf.json, e)
			case !uses && (e == nil || !namesField(e, pf.json) || !strings.Contains(e.Message, a)):
				t.Errorf("%s: %s ignores %s, want it refused naming both: %v", what, a, pf.json, e)
			}
			zero := zeros[pf.class]
			if pf.special == "stringOrArray" {
				zero = `[]`
			}
			if _, e := ParseProcessParams(object(base, pf.json, zero)); e != nil && strings.Contains(e.Message, "does not apply") {
				t.Errorf("process %s %s=%s (the zero value): %v", a, pf.json, zero, e)
			}
		}
		if !used {
			t.Errorf("process field %q is read by no action", pf.json)
		}
	}
}
