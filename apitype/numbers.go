package apitype

import (
	"fmt"
	"iter"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// MaxSafe (2^53) is the upper bound of cursors and line counts: every
// integer up to it is exact in a JSON number in every client, and it is
// the conventional "beyond any end" cursor.
const MaxSafe = 1 << 53

// Every number that crosses a boundary (a tool argument, a node-link
// frame) is declared with its range in the struct that carries it, in a
// `range` tag:
//
//	range:"MIN,MAX[,int][,clamp][,str][,unit=UNIT][;ACTION=MIN,MAX...]"
//
// int requires an integer; ACTION=MIN,MAX narrows the range for one
// process action (poll's timeout). CheckRanges enforces the tags, so a
// field without one cannot reach the engine unchecked (a test walks the
// structs and fails on a numeric field without a tag).
//
// clamp marks a tool argument whose reference (OpenClaw's tools) clamps
// instead of refusing: AdmitRanges moves a value outside the range to its
// nearest end, and floors a fraction where an integer is needed, and says
// so in a note for the result. Only what is not a number to clamp is
// still refused: NaN, an infinity, and a magnitude beyond MaxSafe (it
// overflows the engine's arithmetic and is exact in no client). str
// accepts a numeric string ("300") as the number.

// Range is the parsed range of one numeric field.
type Range struct {
	Field    string // JSON name
	Min, Max float64
	Int      bool
	Clamp    bool // clamped and floored, not refused (AdmitRanges)
	Str      bool // a numeric string is accepted
	Unit     string
	Actions  map[string][2]float64 // per process action
}

// String renders the range for messages and docs: "[0, 120000]".
func (r Range) String() string {
	return "[" + fmtNum(r.Min) + ", " + fmtNum(r.Max) + "]"
}

// fmtNum formats a number for a message: plain decimal below 1e21, as
// JavaScript does, and with an exponent beyond, so that a client's 1e308
// is not echoed back as 309 digits.
func fmtNum(f float64) string {
	if math.Abs(f) >= 1e21 {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// ParseRange parses a `range` tag.
func ParseRange(field, tag string) (Range, error) {
	r := Range{Field: field}
	parts := strings.Split(tag, ";")
	base := strings.Split(parts[0], ",")
	if len(base) < 2 {
		return r, fmt.Errorf("range tag %q of %s: want MIN,MAX", tag, field)
	}
	var err error
	if r.Min, err = strconv.ParseFloat(base[0], 64); err != nil {
		return r, fmt.Errorf("range tag %q of %s: %v", tag, field, err)
	}
	if r.Max, err = strconv.ParseFloat(base[1], 64); err != nil {
		return r, fmt.Errorf("range tag %q of %s: %v", tag, field, err)
	}
	for _, o := range base[2:] {
		switch {
		case o == "int":
			r.Int = true
		case o == "clamp":
			r.Clamp = true
		case o == "str":
			r.Str = true
		case strings.HasPrefix(o, "unit="):
			r.Unit = strings.TrimPrefix(o, "unit=")
		default:
			return r, fmt.Errorf("range tag %q of %s: unknown option %q", tag, field, o)
		}
	}
	for _, a := range parts[1:] {
		name, mm, ok := strings.Cut(a, "=")
		lo, hi, ok2 := strings.Cut(mm, ",")
		if !ok || !ok2 {
			return r, fmt.Errorf("range tag %q of %s: bad action range %q", tag, field, a)
		}
		l, e1 := strconv.ParseFloat(lo, 64)
		h, e2 := strconv.ParseFloat(hi, 64)
		if e1 != nil || e2 != nil {
			return r, fmt.Errorf("range tag %q of %s: bad action range %q", tag, field, a)
		}
		if r.Actions == nil {
			r.Actions = map[string][2]float64{}
		}
		r.Actions[name] = [2]float64{l, h}
	}
	if !(r.Min <= r.Max) {
		return r, fmt.Errorf("range tag %q of %s: min > max", tag, field)
	}
	return r, nil
}

// For returns the range that applies to action.
func (r Range) For(action string) Range {
	if a, ok := r.Actions[action]; ok {
		r.Min, r.Max = a[0], a[1]
	}
	r.Actions = nil
	return r
}

// Check validates v against the range.
func (r Range) Check(v float64) *Error {
	kind := "a number"
	if r.Int {
		kind = "an integer"
	}
	unit := ""
	if r.Unit != "" {
		unit = " (" + r.Unit + ")"
	}
	bad := math.IsNaN(v) || math.IsInf(v, 0) || v < r.Min || v > r.Max || (r.Int && v != math.Trunc(v))
	if bad {
		return Errorf(CodeInvalidArgument, "Invalid parameter %q: expected %s in %s%s, got %s.", r.Field, kind, r, unit, fmtNum(v))
	}
	return nil
}

// Admit checks v against a clamp range and returns the value to use: v
// itself when it is in range, else the nearest end of the range, floored
// when the range needs an integer; note says what was changed ("" when
// nothing). A value that is not a finite number within ±MaxSafe is
// refused as Check refuses it. A range without clamp only checks.
func (r Range) Admit(v float64) (float64, string, *Error) {
	if !r.Clamp {
		return v, "", r.Check(v)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > MaxSafe {
		kind := "a number"
		if r.Int {
			kind = "an integer"
		}
		return v, "", Errorf(CodeInvalidArgument, "Invalid parameter %q: expected %s (values outside %s are clamped to it), got %s.", r.Field, kind, r, fmtNum(v))
	}
	w := v
	var why []string
	if r.Int && w != math.Trunc(w) {
		w = math.Floor(w)
		why = append(why, "not an integer")
	}
	if w < r.Min || w > r.Max {
		w = min(max(w, r.Min), r.Max)
		why = append(why, "outside "+r.String())
	}
	if len(why) == 0 {
		return v, "", nil
	}
	unit := ""
	if r.Unit != "" {
		unit = " " + unitWord(r.Unit)
	}
	return w, fmt.Sprintf("%s %s is %s; used %s%s.", r.Field, fmtNum(v), strings.Join(why, " and "), fmtNum(w), unit), nil
}

// AdmitRanges applies the clamp ranges of the struct v points to (for
// action): each clamp field outside its range is set to the value Admit
// returns, and its note collected; a value Admit refuses is the error.
// Fields without clamp are left to CheckRanges.
func AdmitRanges(v any, action string) ([]string, *Error) {
	var notes []string
	for f, fv := range structFields(v) {
		tag, ok := f.Tag.Lookup("range")
		if !ok || fv.Kind() != reflect.Pointer || fv.IsNil() || fv.Elem().Kind() != reflect.Float64 {
			continue
		}
		r, err := ParseRange(jsonName(f), tag)
		if err != nil {
			return nil, Errorf(CodeInternal, "%v", err)
		}
		if !r.Clamp {
			continue
		}
		w, note, e := r.For(action).Admit(fv.Elem().Float())
		if e != nil {
			return nil, e
		}
		if note != "" {
			x := w
			fv.Set(reflect.ValueOf(&x))
			notes = append(notes, note)
		}
	}
	return notes, nil
}

// Ranges lists the numeric fields of a parameter struct (ExecParams,
// ProcessParams, NodeRunParams, …) with their ranges, in field order. It
// panics on a numeric field without a valid tag: that is a programming
// error the tests catch.
func Ranges(v any) []Range {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []Range
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !isNumeric(f.Type) {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		tag, ok := f.Tag.Lookup("range")
		if !ok {
			panic(fmt.Sprintf("apitype: numeric field %s.%s has no range tag", t.Name(), f.Name))
		}
		r, err := ParseRange(name, tag)
		if err != nil {
			panic("apitype: " + err.Error())
		}
		out = append(out, r)
	}
	return out
}

// isNumeric reports whether t is a number or a pointer to one.
func isNumeric(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// CheckRanges validates every numeric field of the struct v points to
// against its `range` tag; action selects per-action ranges. Absent
// optional numbers (nil pointers) pass.
func CheckRanges(v any, action string) *Error {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	t := rv.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !isNumeric(f.Type) {
			continue
		}
		fv := rv.Field(i)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		var x float64
		switch {
		case fv.CanInt():
			x = float64(fv.Int())
		case fv.CanUint():
			x = float64(fv.Uint())
		default:
			x = fv.Float()
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		r, err := ParseRange(name, f.Tag.Get("range"))
		if err != nil {
			return Errorf(CodeInternal, "%v", err)
		}
		if e := r.For(action).Check(x); e != nil {
			return e
		}
	}
	return nil
}

// CheckStrings rejects a NUL byte in any string field of the struct v
// points to (strings, string slices, string maps: keys and values), except
// fields tagged nul:"ok" (bytes for a session's stdin, a regular
// expression). Strings become argv entries, environment entries and paths,
// none of which can hold a NUL.
func CheckStrings(v any) *Error {
	for f, fv := range structFields(v) {
		if f.Tag.Get("nul") == "ok" {
			continue
		}
		name := jsonName(f)
		bad := func(s string) bool { return strings.IndexByte(s, 0) >= 0 }
		found := false
		switch {
		case fv.Kind() == reflect.String:
			found = bad(fv.String())
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String:
			for j := 0; j < fv.Len() && !found; j++ {
				found = bad(fv.Index(j).String())
			}
		case fv.Kind() == reflect.Map && fv.Type().Key().Kind() == reflect.String && fv.Type().Elem().Kind() == reflect.String:
			for it := fv.MapRange(); it.Next() && !found; {
				found = bad(it.Key().String()) || bad(it.Value().String())
			}
		}
		if found {
			return Errorf(CodeInvalidArgument, "Invalid parameter %q: must not contain a NUL byte.", name)
		}
	}
	return nil
}

// structFields yields the exported fields of the struct v points to and
// their values.
func structFields(v any) iter.Seq2[reflect.StructField, reflect.Value] {
	return func(yield func(reflect.StructField, reflect.Value) bool) {
		rv := reflect.ValueOf(v)
		for rv.Kind() == reflect.Pointer {
			rv = rv.Elem()
		}
		t := rv.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && !yield(f, rv.Field(i)) {
				return
			}
		}
	}
}

// jsonName is a field's name on the wire.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// HTTPQuery declares the numeric query parameters (and the Last-Event-ID
// header) of the HTTP API's streams and tails.
type HTTPQuery struct {
	// Since is a journal cursor (session stream) or an event or ledger
	// sequence number.
	Since int64 `json:"since" range:"0,9007199254740992,int"`
	// Limit is the number of ledger records to return (0: 100).
	Limit int64 `json:"limit" range:"0,100000,int,unit=records"`
}

// ParseQuery parses the query parameter name of HTTPQuery from its text;
// empty is 0.
func ParseQuery(name, s string) (int64, *Error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	for _, r := range Ranges(HTTPQuery{}) {
		if r.Field != name {
			continue
		}
		f, ok := numericString(s)
		if !ok {
			return 0, Errorf(CodeInvalidArgument, "Invalid parameter %q: expected an integer in %s.", name, r)
		}
		if e := r.Check(f); e != nil {
			return 0, e
		}
		return int64(f), nil
	}
	return 0, Errorf(CodeInternal, "no range for query parameter %q", name)
}

// DocRow is the row of the numeric-ranges table in docs/tools.md for a
// field of tool: `| tool | `field` | unit | range | integer | outside |`.
func DocRow(tool string, r Range) string {
	rng := r.String()
	var acts []string
	for a := range r.Actions {
		acts = append(acts, a)
	}
	sort.Strings(acts)
	for _, a := range acts {
		rng += "; " + a + ": " + r.For(a).String()
	}
	unit := r.Unit
	if unit == "" {
		unit = "—"
	}
	integer := "no"
	if r.Int {
		integer = "yes"
	}
	outside := "refused"
	if r.Clamp {
		outside = "clamped"
		if r.Int {
			outside += ", fractions floored"
		}
	}
	return fmt.Sprintf("| %s | `%s` | %s | %s | %s | %s |", tool, r.Field, unit, rng, integer, outside)
}
