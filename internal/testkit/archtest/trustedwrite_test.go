package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// writesInPlace lists the places allowed to create or overwrite a file in
// place (os.WriteFile, os.Create, os.OpenFile with O_CREATE but without
// O_APPEND), as "<file>:<function>", with the reason. Anything else that
// writes a file a later reader trusts (a token, a key, a state or config
// file) must go through internal/base/fsutil, so that a write cut short by
// a full disk or a crash never leaves an empty or partial file under the
// real name: a first start on a full disk once left an empty
// operator.token that every later start used.
var writesInPlace = map[string]string{
	"engine/engine.go:prepareHome":                          "an empty probe file, removed at once",
	"engine/engine.go:lockHome":                             "the lock file: its content is informational",
	"internal/session/supervisor/contain_linux.go:*":        "cgroup control files",
	"internal/session/supervisor/limits_linux.go:*":         "cgroup control files",
	"internal/session/supervisor/sys_linux.go:startOutside": "cgroup.procs",
	"internal/base/fsutil/json.go:writeNew":                 "CreateJSON: a first record created exclusively (nobody reads it before it is complete), removed on failure",
	"internal/base/fsutil/lock.go:LockFile":                 "lock files: their content is never read",
	"internal/store/ledger/ledger.go:openOwn":               "the ledger's own files: its lock, HEAD (rewritten in place at a fixed size; ledger verify reports an empty or torn one) and segments (appended)",
	"internal/host/sandbox/git.go:placeholder":              "an empty placeholder file git expects, nothing is read from it",
	"internal/host/sandbox/git.go:placeholders":             "an empty placeholder file git expects, nothing is read from it",
	"internal/host/sandbox/bwrap/runas.go:stageMounts":      "empty mount targets on a private tmpfs",
	"internal/testkit/e2etest/harness.go:NewHome":           "a test's fresh home in its temp dir, written before any conch process starts",
	"internal/testkit/e2etest/policy.go:GatedHome":          "a test's fresh home in its temp dir, written before any conch process starts",
}

// TestTrustedFilesWrittenAtomically finds every call that creates or
// overwrites a file in place and checks it against writesInPlace.
func TestTrustedFilesWrittenAtomically(t *testing.T) {
	used := map[string]bool{}
	defer func() {
		for k := range writesInPlace {
			if !used[k] {
				t.Errorf("writesInPlace entry %s matches no call: remove it", k)
			}
		}
	}()
	eachFunc(t, func(rel string, fset *token.FileSet, fn *ast.FuncDecl) {
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !writesFileInPlace(call) {
				return true
			}
			key := rel + ":" + fn.Name.Name
			if _, ok := writesInPlace[key]; ok {
				used[key] = true
				return true
			}
			if _, ok := writesInPlace[rel+":*"]; ok {
				used[rel+":*"] = true
				return true
			}
			t.Errorf("%s (%s) writes a file in place: use internal/base/fsutil, or add it to writesInPlace with the reason it is safe", fset.Position(call.Pos()), key)
			return true
		})
	})
}

// eachFunc calls f for every function with a body in the module's non-test
// Go files (bench and hidden directories left out), with the file's path
// relative to the module root.
func eachFunc(t *testing.T, f func(rel string, fset *token.FileSet, fn *ast.FuncDecl)) {
	t.Helper()
	root := filepath.Join("..", "..", "..")
	fset := token.NewFileSet()
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "bench" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		for _, decl := range file.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				f(rel, fset, fn)
			}
		}
		return nil
	})
}

// writesFileInPlace reports os.WriteFile, os.Create and os.OpenFile with
// O_CREATE but without O_APPEND, and the same flags given to
// openNoFollow (internal/host/sandbox's os.OpenFile that refuses a symlink,
// per OS).
func writesFileInPlace(call *ast.CallExpr) bool {
	if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "openNoFollow" && len(call.Args) >= 2 {
		flags := types(call.Args[1])
		return flags["O_CREATE"] && !flags["O_APPEND"]
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "os" {
		return false
	}
	switch sel.Sel.Name {
	case "WriteFile", "Create":
		return true
	case "OpenFile":
		if len(call.Args) < 2 {
			return false
		}
		flags := types(call.Args[1])
		return flags["O_CREATE"] && !flags["O_APPEND"]
	}
	return false
}

// types returns the identifiers named in an expression.
func types(e ast.Expr) map[string]bool {
	out := map[string]bool{}
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			out[id.Name] = true
		}
		return true
	})
	return out
}
