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

// renames lists the os.Rename calls allowed outside internal/fsutil, as
// "<file>:<function>", with the reason: each moves a directory, which is
// not a file write, or a socket. A file is replaced through fsutil.WriteFile or
// fsutil.Write, never by a temporary file renamed by hand.
var renames = map[string]string{
	"engine/dirs.go:put":                   "moves a finished session directory into the pool of free ones",
	"engine/dirs.go:removeSession":         "moves a session directory aside before removing it",
	"internal/unixsock/unixsock.go:Listen": "moves a socket, bound and chmodded in a private directory, onto its path",
}

// TestFilePrimitivesInFsutil keeps the file-system primitives in one place
// (internal/fsutil) and the process umask untouched, in every non-test Go
// file:
//   - flock(2) (syscall.Flock, unix.Flock) only in internal/fsutil: one
//     lock helper, with one EINTR handling;
//   - os.Rename only in internal/fsutil and the directory moves of
//     renames: a temporary file renamed into place is the atomic writer's
//     job;
//   - no call of Umask anywhere: the umask belongs to the whole process,
//     and a command forked by another goroutine while it is changed runs
//     with it. Files and sockets get explicit modes instead.
func TestFilePrimitivesInFsutil(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	used := map[string]bool{}
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
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		inFsutil := strings.HasPrefix(rel, "internal/fsutil/")
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, _ := sel.X.(*ast.Ident)
				if x == nil {
					return true
				}
				pos := fset.Position(sel.Pos())
				switch {
				case sel.Sel.Name == "Umask" && (x.Name == "syscall" || x.Name == "unix"):
					t.Errorf("%s: %s.Umask changes the umask of the whole process (commands forked meanwhile inherit it): give the file or socket an explicit mode (fsutil.WriteFile, unixsock.Listen)", pos, x.Name)
				case sel.Sel.Name == "Flock" && (x.Name == "syscall" || x.Name == "unix") && !inFsutil:
					t.Errorf("%s: flock outside internal/fsutil: use fsutil.Lock, TryLock or LockFile", pos)
				case sel.Sel.Name == "Rename" && x.Name == "os" && !inFsutil:
					key := rel + ":" + fn.Name.Name
					if _, ok := renames[key]; ok {
						used[key] = true
						return true
					}
					t.Errorf("%s (%s): os.Rename outside internal/fsutil: replace files with fsutil.WriteFile or fsutil.Write; a directory move goes into renames with its reason", pos, key)
				}
				return true
			})
		}
		return nil
	})
	for k := range renames {
		if !used[k] {
			t.Errorf("renames entry %s matches no call: remove it", k)
		}
	}
}
