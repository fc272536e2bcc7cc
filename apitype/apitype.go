// Package apitype holds conch's wire types: the parameters of the exec and
// process tools, the details objects of their results, and the error codes.
//
// It depends only on the standard library so that clients can import it
// without pulling in the engine. Decoding is strict and conch's own (not a
// JSON Schema validator): unknown fields are rejected with the exact texts
// of the specification, enums are case-insensitive where the spec says so,
// and every number is checked against the range declared in its struct
// tag (numbers.go): out of range, not finite or not an integer where one
// is needed is invalid_argument naming the field and the range.
package apitype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Error codes of failed tool calls.
const (
	CodeInvalidArgument = "invalid_argument"
	CodeNotFound        = "not_found"
	CodeInvalidState    = "invalid_state"
	CodeHostNotAllowed  = "host_not_allowed"
	CodeSandboxUnavail  = "sandbox_unavailable"
	CodeNodeUnavailable = "node_unavailable"
	CodeNodeNotAllowed  = "node_not_allowed"
	CodeNodeAmbiguous   = "node_ambiguous"
	CodeNodeUnknown     = "node_unknown"
	CodeSecurity        = "security_violation"
	CodeElevatedUnavail = "elevated_unavailable"
	CodeQuotaExceeded   = "quota_exceeded"
	CodeIOError         = "io_error"
	CodeInternal        = "internal"
	CodeUnavailable     = "unavailable"
	CodeSpawnFailed     = "spawn_failed"
	// CodeDiskFull: the home's filesystem is out of space (or below its
	// reserve); no new session starts until space is freed.
	CodeDiskFull = "disk_full"
	// CodeHomeUnwritable: the home cannot be written for another reason
	// (a read-only filesystem, an I/O error, permissions); no new session
	// starts until a write succeeds again.
	CodeHomeUnwritable = "home_unwritable"
)

// Error is the error object carried by results that failed (exec
// status "error"; process failures).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Is makes an *Error without a message the sentinel of its code:
// errors.Is(err, &Error{Code: c}) holds for every *Error of code c in
// err's chain, so callers classify by code, never by text.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Result is what a tool call returns: a text for the model and a details
// object for programs. Details is one of the *Details types of this package.
type Result struct {
	Text    string `json:"text"`
	Details any    `json:"details"`
}

// IsError reports whether the result carries an error object, which is what
// MCP marks isError.
func (r Result) IsError() bool {
	switch d := r.Details.(type) {
	case *ErrorDetails:
		return d.Error != nil
	}
	return false
}

// ErrorDetails is the details object of a result that only reports an
// error: exec's status "error" and process's failed lookups.
type ErrorDetails struct {
	Status string `json:"status"` // "error" (exec) or "failed" (process)
	Error  *Error `json:"error"`
}

// fields decodes a JSON object into its raw members, rejecting anything
// that is not an object and any member whose name is not in known.
func fields(raw []byte, known map[string]bool) (map[string]json.RawMessage, *Error) {
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		return map[string]json.RawMessage{}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, Errorf(CodeInvalidArgument, "Invalid arguments: expected a JSON object (%v).", err)
	}
	var unknown []string
	for k := range m {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, Errorf(CodeInvalidArgument, "Unknown parameter %q.", unknown[0])
	}
	// A name repeated within one object has no single meaning (Go keeps
	// the last value, other readers the first): refused, at any depth.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers beyond float64 are the range check's
	if top, key, err := duplicateKey(dec, "", 0); err != nil {
		return nil, Errorf(CodeInvalidArgument, "Invalid arguments: expected a JSON object (%v).", err)
	} else if key != "" {
		if top == key {
			return nil, Errorf(CodeInvalidArgument, "Duplicate parameter %q.", key)
		}
		return nil, Errorf(CodeInvalidArgument, "Invalid parameter %q: duplicate key %q.", top, key)
	}
	return m, nil
}

// duplicateKey reads one JSON value from dec and returns the first name
// repeated within one of its objects, with the top-level member it is
// in (top is the name itself at depth 0).
func duplicateKey(dec *json.Decoder, top string, depth int) (string, string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", "", err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return "", "", nil
	}
	var seen map[string]bool
	if d == '{' {
		seen = map[string]bool{}
	}
	for dec.More() {
		t := top
		if seen != nil {
			kt, err := dec.Token()
			if err != nil {
				return "", "", err
			}
			k, _ := kt.(string)
			if depth == 0 {
				t = k
			}
			if seen[k] {
				return t, k, nil
			}
			seen[k] = true
		}
		if t2, k2, err := duplicateKey(dec, t, depth+1); err != nil || k2 != "" {
			return t2, k2, err
		}
	}
	_, err = dec.Token() // the closing delimiter
	return "", "", err
}

func typeErr(name, want string) *Error {
	return Errorf(CodeInvalidArgument, "Invalid parameter %q: expected %s.", name, want)
}

func isNull(r json.RawMessage) bool { return r == nil || string(r) == "null" }

func decodeString(m map[string]json.RawMessage, name string, dst *string) *Error {
	r, ok := m[name]
	if !ok || isNull(r) {
		return nil
	}
	if err := json.Unmarshal(r, dst); err != nil {
		return typeErr(name, "a string")
	}
	return nil
}

func decodeBool(m map[string]json.RawMessage, name string, dst **bool) *Error {
	r, ok := m[name]
	if !ok || isNull(r) {
		return nil
	}
	var b bool
	if err := json.Unmarshal(r, &b); err != nil {
		return typeErr(name, "a boolean")
	}
	*dst = &b
	return nil
}

// decodeNumber accepts a JSON number, and a numeric string ("500") when
// strs is set (exec's numbers, for compatibility). A string where only
// numbers are accepted (process) is rejected naming the unit, so a model
// that sent "30s" or "5000" learns what to send. The range, and
// finiteness ("NaN", "Inf", 1e400), are checked afterwards by CheckRanges.
func decodeNumber(m map[string]json.RawMessage, name string, strs bool, rng *Range, dst **float64) *Error {
	r, ok := m[name]
	if !ok || isNull(r) {
		return nil
	}
	var f float64
	if err := json.Unmarshal(r, &f); err != nil {
		// A number beyond float64 (1e400) becomes ±Inf, which the
		// range check then rejects with the field's range.
		if v, perr := strconv.ParseFloat(string(r), 64); errors.Is(perr, strconv.ErrRange) {
			*dst = &v
			return nil
		}
		var s string
		if json.Unmarshal(r, &s) != nil {
			return typeErr(name, "a number")
		}
		if !strs {
			want := "a JSON number"
			if rng != nil {
				want += " in " + rng.String()
				if rng.Unit != "" {
					want += " (" + unitWord(rng.Unit) + ")"
				}
			}
			return Errorf(CodeInvalidArgument, "Invalid parameter %q: expected %s, not a string (got %q).", name, want, s)
		}
		v, ok := numericString(s)
		if !ok {
			if rng != nil {
				want := "a number in " + rng.String()
				if rng.Unit != "" {
					want += " (" + unitWord(rng.Unit) + ")"
				}
				return Errorf(CodeInvalidArgument, "Invalid parameter %q: expected %s, or a numeric string such as \"%s\" (got %q).", name, want, fmtNum(rng.Max), s)
			}
			return typeErr(name, "a number")
		}
		f = v
	}
	*dst = &f
	return nil
}

var (
	decimalRE   = lazyRE(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
	nonFiniteRE = lazyRE(`^(?i)[+-]?(nan|inf|infinity)$`)
)

// numericString reads a number sent as text (exec's numeric strings, an
// HTTP query parameter): surrounding spaces, then a decimal number or a
// spelling of NaN or an infinity (which the range check then refuses,
// naming the range), a decimal too large for a double being ±Inf. The
// rest of ParseFloat's syntax ("1_000", "0x1p4") is not a number here.
func numericString(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if !decimalRE().MatchString(s) && !nonFiniteRE().MatchString(s) {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return v, true
}

// unitWord spells out a range tag's unit for messages.
func unitWord(unit string) string {
	switch unit {
	case "ms":
		return "milliseconds"
	case "s":
		return "seconds"
	}
	return unit
}

func decodeStrings(m map[string]json.RawMessage, name string, dst *[]string) *Error {
	r, ok := m[name]
	if !ok || isNull(r) {
		return nil
	}
	if !stringArray(r, dst) {
		return typeErr(name, "an array of strings")
	}
	return nil
}

// stringArray decodes a JSON array of strings; a null element (which
// Go's decoder would make "") is refused.
func stringArray(r json.RawMessage, dst *[]string) bool {
	var ps []*string
	if json.Unmarshal(r, &ps) != nil {
		return false
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		if p == nil {
			return false
		}
		out[i] = *p
	}
	*dst = out
	return true
}

// stringMap decodes a JSON object of strings; a null value (which Go's
// decoder would make "") is refused.
func stringMap(r json.RawMessage, dst *map[string]string) bool {
	var ps map[string]*string
	if json.Unmarshal(r, &ps) != nil {
		return false
	}
	out := make(map[string]string, len(ps))
	for k, p := range ps {
		if p == nil {
			return false
		}
		out[k] = *p
	}
	*dst = out
	return true
}

// CheckEnums checks every string field of the struct v points to that has
// an `enum:"a,b,c"` tag: an empty value is absent; any other is trimmed,
// lower-cased and must be one of the listed values, which replaces it.
func CheckEnums(v any) *Error {
	for f, fv := range structFields(v) {
		tag, ok := f.Tag.Lookup("enum")
		if !ok {
			continue
		}
		l, e := enum(jsonName(f), fv.String(), strings.Split(tag, ",")...)
		if e != nil {
			return e
		}
		fv.SetString(l)
	}
	return nil
}

// enum lower-cases v and checks it against allowed.
func enum(name, v string, allowed ...string) (string, *Error) {
	if v == "" {
		return "", nil
	}
	l := strings.ToLower(strings.TrimSpace(v))
	for _, a := range allowed {
		if l == a {
			return l, nil
		}
	}
	return "", Errorf(CodeInvalidArgument, "Invalid %s %q: expected one of %s.", name, v, strings.Join(allowed, ", "))
}

// More error codes: of the engine's gates (preflight, denied, approvals,
// idempotency, quotas) and of the HTTP API (authentication, conflicts).
const (
	CodePreflight           = "preflight"
	CodeUnauthenticated     = "unauthenticated"
	CodeDenied              = "denied"
	CodeConflict            = "conflict"
	CodeIdempotencyConflict = "idempotency_conflict"
	CodeAlreadyResolved     = "already_resolved"
	// CodeApprovalDropped: a decision on a request whose run can no
	// longer happen (the process holding its prepared run is gone).
	CodeApprovalDropped = "approval_dropped"
	// CodeResourceExhausted: the command was not started for want of
	// file descriptors (EMFILE, ENFILE) in conch or its supervisors.
	CodeResourceExhausted = "resource_exhausted"
	CodeRateLimited       = "rate_limited"
	CodeTimeout           = "timeout"
	CodeApprovalFailed    = "approval_failed"
)

// codeStatus is the one list of error codes, each with its HTTP status
// (docs/gateway.md lists them). A test parses this package and
// fails on a Code constant missing here, and on a code the rest of the
// module sends that is not here.
var codeStatus = map[string]int{
	CodeInvalidArgument: 400,
	CodePreflight:       422, CodeInvalidPatch: 422, CodeContext: 422,
	CodeUnauthenticated: 401,
	CodeForbidden:       403, CodeDenied: 403, CodeHostNotAllowed: 403, CodeSecurity: 403,
	CodeElevatedUnavail: 403, CodeNodeNotAllowed: 403, CodeOutside: 403,
	CodeNotFound: 404, CodeNodeUnknown: 404,
	CodeConflict: 409, CodeIdempotencyConflict: 409, CodeNodeAmbiguous: 409, CodeAlreadyResolved: 409, CodeApprovalDropped: 409, CodeResourceExhausted: 503, CodeInvalidState: 409,
	CodeQuotaExceeded: 429, CodeRateLimited: 429,
	CodeSandboxUnavail: 503, CodeNodeUnavailable: 503, CodeUnavailable: 503, CodeHomeUnwritable: 503,
	CodeTimeout:  504,
	CodeDiskFull: 507,
	// 500
	CodeApprovalFailed: 500, CodeIOError: 500, CodeInternal: 500, CodeSpawnFailed: 500, CodePatchAborted: 500,
}

// Codes returns every error code, sorted.
func Codes() []string {
	out := make([]string, 0, len(codeStatus))
	for c := range codeStatus {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// HTTPStatus returns the HTTP status of an error code; codes not in
// Codes are 500.
func HTTPStatus(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return 500
}
