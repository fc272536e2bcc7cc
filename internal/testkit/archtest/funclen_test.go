package archtest

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// smallFuncDirs are the main paths whose functions stay small named
// steps: the engine, the CLI wiring, the operator use cases and the
// adapters.
var smallFuncDirs = []string{"engine/", "internal/cli/", "internal/admin/", "internal/adapter/httpapi/", "internal/adapter/mcpserver/"}

// maxFuncLines is the longest a function of smallFuncDirs may be, from
// its func keyword to its closing brace.
const maxFuncLines = 100

// TestFunctionsAreSmall fails on a function of smallFuncDirs (test files
// aside) longer than maxFuncLines: a long function on a main path is a
// list of steps waiting for names.
func TestFunctionsAreSmall(t *testing.T) {
	n := 0
	eachFunc(t, func(rel string, fset *token.FileSet, fn *ast.FuncDecl) {
		in := false
		for _, d := range smallFuncDirs {
			if strings.HasPrefix(rel, d) && !strings.Contains(strings.TrimPrefix(rel, d), "/") {
				in = true
			}
		}
		if !in {
			return
		}
		n++
		lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
		if lines > maxFuncLines {
			t.Errorf("%s: %s is %d lines (at most %d): split it into named steps", fset.Position(fn.Pos()), fn.Name.Name, lines, maxFuncLines)
		}
	})
	if n < 200 {
		t.Fatalf("found only %d functions: the walk is broken", n)
	}
}
