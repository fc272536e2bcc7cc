package archtest

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// renames lists the os.Rename calls allowed outside internal/base/fsutil, as
// "<file>:<function>", with the reason: each moves a directory, which is
// not a file write, or a socket. A file is replaced through fsutil.WriteFile or
// fsutil.Write, never by a temporary file renamed by hand.
var renames = map[string]string{
	"internal/session/registry/dirs.go:put":     "moves a finished session directory into the pool of free ones",
	"internal/session/registry/dirs.go:Remove":  "moves a session directory aside before removing it",
	"internal/base/unixsock/unixsock.go:Listen": "moves a socket, bound and chmodded in a private directory, onto its path",
}

// umasks lists the files allowed to call Umask, with the reason.
var umasks = map[string]string{
	"internal/base/unixsock/unixsocktest/unixsocktest.go": "a helper only tests import (TestTestHelpersOnlyInTests): it sets the umask the test expects",
}

// TestFilePrimitivesInFsutil keeps the file-system primitives in one place
// (internal/base/fsutil) and the process umask untouched, in every non-test Go
// file:
//   - flock(2) (syscall.Flock, unix.Flock) only in internal/base/fsutil: one
//     lock helper, with one EINTR handling;
//   - os.Rename only in internal/base/fsutil and the directory moves of
//     renames: a temporary file renamed into place is the atomic writer's
//     job;
//   - no call of Umask (outside the test helpers of umasks): the umask belongs to the whole process,
//     and a command forked by another goroutine while it is changed runs
//     with it. Files and sockets get explicit modes instead.
func TestFilePrimitivesInFsutil(t *testing.T) {
	used := map[string]bool{}
	eachFunc(t, func(rel string, fset *token.FileSet, fn *ast.FuncDecl) {
		inFsutil := strings.HasPrefix(rel, "internal/base/fsutil/")
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
				if _, ok := umasks[rel]; ok {
					used[rel] = true
					return true
				}
				t.Errorf("%s: %s.Umask changes the umask of the whole process (commands forked meanwhile inherit it): give the file or socket an explicit mode (fsutil.WriteFile, unixsock.Listen)", pos, x.Name)
			case sel.Sel.Name == "Flock" && (x.Name == "syscall" || x.Name == "unix") && !inFsutil:
				t.Errorf("%s: flock outside internal/base/fsutil: use fsutil.Lock, TryLock or LockFile", pos)
			case sel.Sel.Name == "Rename" && x.Name == "os" && !inFsutil:
				key := rel + ":" + fn.Name.Name
				if _, ok := renames[key]; ok {
					used[key] = true
					return true
				}
				t.Errorf("%s (%s): os.Rename outside internal/base/fsutil: replace files with fsutil.WriteFile or fsutil.Write; a directory move goes into renames with its reason", pos, key)
			}
			return true
		})
	})
	for _, allowed := range []map[string]string{renames, umasks} {
		for k := range allowed {
			if !used[k] {
				t.Errorf("allow-list entry %s matches no call: remove it", k)
			}
		}
	}
}

// TestTestHelpersOnlyInTests: the packages written for tests (their name
// ends in "test") are imported by no package, only by tests.
func TestTestHelpersOnlyInTests(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, d := range p.Deps {
			if strings.HasPrefix(d, mod+"/") && strings.HasSuffix(d, "test") && d != mod+"/internal/testkit/archtest" {
				t.Errorf("%s imports the test helper %s", p.ImportPath, d)
			}
		}
	}
}
