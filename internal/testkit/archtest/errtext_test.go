package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// errTextAllowed lists the functions that may read an error's text
// ("file:function", the file relative to the module root) and why. Every
// failure conch itself must tell apart has a sentinel or a code
// (errors.Is, errors.As, apitype.Error.Code), so its message can change
// freely; what is left is text a library offers no other way.
var errTextAllowed = map[string]string{
	"internal/cli/root.go:usageError": "cobra's unknown-command error is a plain fmt.Errorf with a hint appended: no sentinel exists; the text is only shortened for display",
}

// classifiers are the functions that test a string: called on an
// error's text they classify the error by its wording.
var classifiers = map[string]map[string]bool{
	"strings": {"Contains": true, "ContainsAny": true, "ContainsRune": true, "HasPrefix": true, "HasSuffix": true,
		"Index": true, "IndexAny": true, "IndexByte": true, "IndexRune": true, "LastIndex": true, "EqualFold": true,
		"Count": true, "Cut": true, "CutPrefix": true, "CutSuffix": true, "Compare": true},
	"bytes":  {"Contains": true, "HasPrefix": true, "HasSuffix": true, "Index": true, "Equal": true, "EqualFold": true},
	"regexp": {"MatchString": true, "Match": true},
	"slices": {"Contains": true, "Index": true},
}

// TestNoErrorTextMatching forbids classifying a failure by the text of an
// error (err.Error(), or an apitype.Error's Message) in non-test code:
// comparing it, switching on it, or testing it with strings.Contains,
// HasPrefix and the like, directly or through a variable holding it.
// Messages are for people; a caller that must tell failures apart gets a
// sentinel error or a code.
func TestNoErrorTextMatching(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range listPackages(t) {
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			rel := p.ImportPath[len(mod):] + "/" + name
			if len(rel) > 0 && rel[0] == '/' {
				rel = rel[1:]
			}
			for _, m := range errTextMatches(f) {
				if _, ok := errTextAllowed[rel+":"+m.fn]; ok {
					continue
				}
				t.Errorf("%s (%s): classifies an error by its text; give the failure a sentinel (errors.Is) or a code", fset.Position(m.pos), m.fn)
			}
		}
	}
}

// errTextMatch is a place that tests an error's text, and its function.
type errTextMatch struct {
	pos token.Pos
	fn  string
}

// errTextMatches returns where f tests an error's text.
func errTextMatches(f *ast.File) []errTextMatch {
	var out []errTextMatch
	// Variables that hold an error's text, per function body.
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			return true
		}
		held := map[string]bool{}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
				for i, r := range as.Rhs {
					if id, ok := as.Lhs[i].(*ast.Ident); ok && isErrText(r, nil) {
						held[id.Name] = true
					}
				}
			}
			return true
		})
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				sel, ok := x.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok || !classifiers[pkg.Name][sel.Sel.Name] {
					return true
				}
				for _, a := range x.Args {
					if isErrText(a, held) {
						out = append(out, errTextMatch{x.Pos(), fn.Name.Name})
						break
					}
				}
			case *ast.BinaryExpr:
				// Comparing with "" asks whether there is a message, not
				// what it says.
				if (x.Op == token.EQL || x.Op == token.NEQ) && !isEmpty(x.X) && !isEmpty(x.Y) && (isErrText(x.X, held) || isErrText(x.Y, held)) {
					out = append(out, errTextMatch{x.Pos(), fn.Name.Name})
				}
			case *ast.SwitchStmt:
				if x.Tag != nil && isErrText(x.Tag, held) {
					out = append(out, errTextMatch{x.Pos(), fn.Name.Name})
				}
			}
			return true
		})
		return false
	})
	return out
}

// isErrText reports whether e is an error's text: x.Error(), x.Message
// (apitype.Error), or a variable assigned one of them.
func isErrText(e ast.Expr, held map[string]bool) bool {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return isErrText(x.X, held)
	case *ast.CallExpr:
		sel, ok := x.Fun.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "Error" && len(x.Args) == 0
	case *ast.SelectorExpr:
		return x.Sel.Name == "Message"
	case *ast.Ident:
		return held[x.Name]
	}
	return false
}

func isEmpty(e ast.Expr) bool {
	l, ok := e.(*ast.BasicLit)
	return ok && l.Kind == token.STRING && (l.Value == `""` || l.Value == "``")
}

// The detector finds every form of the class and nothing else: each
// classifier applied to each spelling of an error's text, comparisons,
// switches, and a variable holding the text.
func TestErrTextDetector(t *testing.T) {
	texts := []string{"err.Error()", "aerr.Message", "(err.Error())", "msg"}
	var bad []string
	for pkg, fns := range classifiers {
		for fn := range fns {
			for _, x := range texts {
				bad = append(bad, pkg+"."+fn+"("+x+`, "x")`)
			}
		}
	}
	for _, x := range texts {
		bad = append(bad, x+` == "session id in use"`, `"open pty" != `+x)
	}
	good := []string{`err.Error() == ""`, `aerr.Message != ""`, `strings.TrimPrefix(err.Error(), "fatal: ")`,
		`strings.Contains(reason, "x")`, `errors.Is(err, ErrX)`, `fmt.Sprint(err.Error())`}
	parse := func(expr string) *ast.File {
		src := "package p\nfunc f() {\n\tmsg := err.Error()\n\t_ = msg\n\t_ = " + expr + "\n}\n"
		f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return f
	}
	for _, e := range bad {
		if len(errTextMatches(parse(e))) != 1 {
			t.Errorf("not caught: %s", e)
		}
	}
	for _, e := range good {
		if n := len(errTextMatches(parse(e))); n != 0 {
			t.Errorf("caught, but is no classification: %s", e)
		}
	}
	sw, err := parser.ParseFile(token.NewFileSet(), "x.go", "package p\nfunc f() {\n\tswitch err.Error() {\n\tcase \"a\":\n\t}\n}\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(errTextMatches(sw)) != 1 {
		t.Error("not caught: switch err.Error()")
	}
}
