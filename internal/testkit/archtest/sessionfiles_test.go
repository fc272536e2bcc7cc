package archtest

import (
	"go/ast"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sessionFileOwner is the one package that writes the files of a session
// directory (meta.json, exit.json, state.json): its writers (WriteMeta,
// WriteExit, WriteExitDurable, PersistExit, CreateState, WriteState) are
// what the supervisor, the engine and the node hub call.
const sessionFileOwner = "internal/session/supervisor/proto/"

// sessionFiles are the names of the files it owns.
var sessionFiles = []string{"exit.json", "meta.json", "state.json"}

// sessionPaths are the owner's functions that name those files.
var sessionPaths = []string{"ExitPath", "MetaPath", "StatePath"}

// fileWriters are the calls that write a file: fsutil's writers and the
// os calls that create or replace one.
var fileWriters = map[string][]string{
	"fsutil": {"WriteJSON", "WriteJSONDurable", "CreateJSON", "Persist", "Write", "WriteFile", "CreateFile"},
	"os":     {"WriteFile", "Create", "OpenFile"},
}

// TestSessionFilesHaveOneWriter: outside the owner, in every non-test Go
// file, no string names a session file (so no path to one is built by
// hand), and no file writer is called on a path from the owner's path
// functions. A stray writer of exit.json, meta.json or state.json has to
// do one or the other.
func TestSessionFilesHaveOneWriter(t *testing.T) {
	eachFunc(t, func(rel string, fset *token.FileSet, fn *ast.FuncDecl) {
		if strings.HasPrefix(rel, sessionFileOwner) {
			return
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BasicLit:
				if x.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(x.Value)
				if err != nil {
					return true
				}
				for _, name := range sessionFiles {
					if s == name || strings.HasSuffix(s, "/"+name) {
						t.Errorf("%s: %q names a session file outside %s: use its path functions (%v) and writers", fset.Position(x.Pos()), s, sessionFileOwner, sessionPaths)
					}
				}
			case *ast.CallExpr:
				pkg, name := selector(x.Fun)
				if !slices.Contains(fileWriters[pkg], name) {
					return true
				}
				for _, arg := range x.Args {
					ast.Inspect(arg, func(n ast.Node) bool {
						if c, ok := n.(*ast.CallExpr); ok {
							if p, f := selector(c.Fun); p == "proto" && slices.Contains(sessionPaths, f) {
								t.Errorf("%s: %s.%s writes proto.%s's file outside %s: call its writer (proto.WriteMeta, WriteExit, …)", fset.Position(x.Pos()), pkg, name, f, sessionFileOwner)
							}
						}
						return true
					})
				}
			}
			return true
		})
	})
}

// stateWriters are the writers of state files whose error a caller must
// look at: the owner's session-file writers and fsutil's checksummed
// JSON.
var stateWriters = map[string][]string{
	"proto":  {"WriteMeta", "WriteExit", "WriteExitDurable", "PersistExit", "CreateState", "WriteState"},
	"fsutil": {"WriteJSON", "WriteJSONDurable", "CreateJSON", "Persist"},
}

// TestStateWriteErrorsChecked: no call of a state-file writer drops its
// error, as a statement of its own or assigned to _, in any non-test Go
// file: a write a full or read-only disk refused is handled (logged,
// counted, and the state reported honestly), never lost.
func TestStateWriteErrorsChecked(t *testing.T) {
	eachFunc(t, func(rel string, fset *token.FileSet, fn *ast.FuncDecl) {
		check := func(e ast.Expr) {
			call, ok := e.(*ast.CallExpr)
			if !ok {
				return
			}
			if pkg, name := selector(call.Fun); slices.Contains(stateWriters[pkg], name) {
				t.Errorf("%s: the error of %s.%s is dropped: handle it (log, count, keep the state honest)", fset.Position(call.Pos()), pkg, name)
			}
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.ExprStmt:
				check(x.X)
			case *ast.GoStmt:
				check(x.Call)
			case *ast.DeferStmt:
				check(x.Call)
			case *ast.AssignStmt:
				if len(x.Lhs) == 1 && len(x.Rhs) == 1 {
					if id, ok := x.Lhs[0].(*ast.Ident); ok && id.Name == "_" {
						check(x.Rhs[0])
					}
				}
			}
			return true
		})
	})
}

// selector returns the package and name of a call like pkg.Name(…).
func selector(e ast.Expr) (pkg, name string) {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", ""
	}
	return id.Name, sel.Sel.Name
}
