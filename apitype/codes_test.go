package apitype

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// codeConsts parses this package's sources and returns every string
// constant whose name starts with prefix, by name.
func codeConsts(t *testing.T, prefix string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, sp := range g.Specs {
					vs := sp.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if !strings.HasPrefix(n.Name, prefix) || i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						v, _ := strconv.Unquote(lit.Value)
						out[n.Name] = v
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s constants found", prefix)
	}
	return out
}

// TestEveryCodeRegistered: the Code constants and Codes() are the same
// set, so a new code cannot be declared without an HTTP status.
func TestEveryCodeRegistered(t *testing.T) {
	consts := codeConsts(t, "Code")
	vals := map[string]string{}
	for name, v := range consts {
		if _, ok := codeStatus[v]; !ok {
			t.Errorf("%s = %q is not in codeStatus (give it an HTTP status)", name, v)
		}
		if other, dup := vals[v]; dup {
			t.Errorf("%s and %s are both %q", name, other, v)
		}
		vals[v] = name
	}
	for _, c := range Codes() {
		if _, ok := vals[c]; !ok {
			t.Errorf("code %q has no Code constant", c)
		}
		if !regexp.MustCompile(`^[a-z][a-z_]*$`).MatchString(c) {
			t.Errorf("code %q is not lower_snake_case", c)
		}
	}
}

// TestEveryNodeCodeRegistered: the node-frame codes (upper case) and
// NodeCodes() are the same set.
func TestEveryNodeCodeRegistered(t *testing.T) {
	listed := map[string]bool{}
	for _, c := range NodeCodes() {
		if listed[c] {
			t.Errorf("%q listed twice", c)
		}
		listed[c] = true
	}
	upper := regexp.MustCompile(`^[A-Z][A-Z_]*$`)
	seen := map[string]bool{}
	for name, v := range codeConsts(t, "Node") {
		if !upper.MatchString(v) {
			continue // node reference kinds, not codes
		}
		seen[v] = true
		if !listed[v] {
			t.Errorf("%s = %q is not in NodeCodes", name, v)
		}
	}
	for c := range listed {
		if !seen[c] {
			t.Errorf("NodeCodes lists %q, which has no constant", c)
		}
		e := fmt.Errorf("frame: %w", Errorf(c, "x"))
		for o := range listed {
			if errors.Is(e, &Error{Code: o}) != (o == c) {
				t.Errorf("errors.Is(%s, %s) wrong", c, o)
			}
		}
	}
}

// TestCodesRoundTrip: for every code, an *Error survives JSON, is
// errors.Is its code's sentinel (also wrapped) and no other code's, and
// maps to its HTTP status.
func TestCodesRoundTrip(t *testing.T) {
	codes := Codes()
	for _, c := range codes {
		e := Errorf(c, "something about %s", c)
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back Error
		if err := json.Unmarshal(b, &back); err != nil || back != *e {
			t.Errorf("%s: JSON round trip %s → %+v (%v)", c, b, back, err)
		}
		wrapped := fmt.Errorf("call: %w", e)
		for _, other := range codes {
			if got := errors.Is(wrapped, &Error{Code: other}); got != (other == c) {
				t.Errorf("errors.Is(%s error, %s sentinel) = %v", c, other, got)
			}
		}
		// A target with a message is not a sentinel: Is compares codes only
		// for sentinels.
		if errors.Is(e, &Error{Code: c, Message: "other"}) {
			t.Errorf("%s: matched a non-sentinel target", c)
		}
		var as *Error
		if !errors.As(wrapped, &as) || as.Code != c {
			t.Errorf("%s: errors.As lost the code", c)
		}
		if s := HTTPStatus(c); s < 400 || s > 599 {
			t.Errorf("%s: HTTP status %d", c, s)
		}
	}
	if HTTPStatus("no_such_code") != 500 {
		t.Errorf("unknown code: %d, want 500", HTTPStatus("no_such_code"))
	}
}

// TestCodeStatusesDocumented: docs/gateway.md's table of statuses lists
// every code with exactly the status HTTPStatus gives it (500 codes may
// be left to "anything else").
func TestCodeStatusesDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "| status | codes |")
	if i < 0 {
		t.Fatal("docs/gateway.md has no status table")
	}
	documented := map[string]int{}
	row := regexp.MustCompile("^\\| (\\d{3}) \\| (.*) \\|$")
	code := regexp.MustCompile("`([a-z_]+)`")
	for _, line := range strings.Split(doc[i:], "\n")[2:] {
		m := row.FindStringSubmatch(line)
		if m == nil {
			break
		}
		st, _ := strconv.Atoi(m[1])
		cell := m[2]
		// Only the codes, not the examples in parentheses.
		for _, c := range code.FindAllStringSubmatch(stripParens(cell), -1) {
			documented[c[1]] = st
		}
	}
	if len(documented) < 20 {
		t.Fatalf("parsed only %d codes from the table", len(documented))
	}
	for c, st := range documented {
		if _, ok := codeStatus[c]; !ok {
			t.Errorf("docs/gateway.md lists %q, which is not a code", c)
		}
		if HTTPStatus(c) != st {
			t.Errorf("%s: HTTPStatus %d, docs/gateway.md %d", c, HTTPStatus(c), st)
		}
	}
	for _, c := range Codes() {
		if _, ok := documented[c]; !ok && HTTPStatus(c) != 500 {
			t.Errorf("%s (HTTP %d) is missing from docs/gateway.md's status table", c, HTTPStatus(c))
		}
	}
}

func stripParens(s string) string {
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestCodesUsedAreRegistered scans the module's Go sources for error codes
// written as literals (apitype.Errorf("x", …), &apitype.Error{Code: "x"},
// writeError(w, status, "x", …)) and requires each to be a registered code
// with the status the literal writeError sends.
func TestCodesUsedAreRegistered(t *testing.T) {
	errorf := regexp.MustCompile(`apitype\.(?:Errorf\(|Error\{Code:\s*)"([^"]+)"`)
	write := regexp.MustCompile(`writeError\(\w+, (\d{3}|http\.Status\w+), "([^"]+)"`)
	statuses := map[string]int{"StatusBadRequest": 400, "StatusUnauthorized": 401, "StatusForbidden": 403,
		"StatusNotFound": 404, "StatusConflict": 409, "StatusInternalServerError": 500, "StatusServiceUnavailable": 503,
		"StatusTooManyRequests": 429, "StatusGatewayTimeout": 504}
	nodeCode := map[string]bool{}
	for _, c := range NodeCodes() {
		nodeCode[c] = true
	}
	found := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range errorf.FindAllStringSubmatch(string(b), -1) {
			found++
			if nodeCode[m[1]] {
				continue
			}
			if _, ok := codeStatus[m[1]]; !ok {
				t.Errorf("%s: code %q is not registered in apitype", path, m[1])
			}
		}
		for _, m := range write.FindAllStringSubmatch(string(b), -1) {
			found++
			if _, ok := codeStatus[m[2]]; !ok {
				t.Errorf("%s: code %q is not registered in apitype", path, m[2])
				continue
			}
			st, err := strconv.Atoi(m[1])
			if err != nil {
				s, ok := statuses[strings.TrimPrefix(m[1], "http.")]
				if !ok {
					continue // 405, 413: statuses of the route, not of the code
				}
				st = s
			}
			if st != HTTPStatus(m[2]) {
				t.Errorf("%s: writeError sends %q with %d, its status is %d", path, m[2], st, HTTPStatus(m[2]))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 20 {
		t.Fatalf("found only %d code literals: the scan is broken", found)
	}
}
