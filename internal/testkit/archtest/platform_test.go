package archtest

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// linuxPaths are Linux-only file-system interfaces: code that reads them
// compiles everywhere and fails at run time elsewhere.
var linuxPaths = []string{"/proc/", "/proc", "/sys/fs/cgroup"}

// linuxPathsAllowed are files built for macOS that name such a path
// without reading it, with the reason.
var linuxPathsAllowed = map[string]string{
	"policy/segment.go":                   "judges a command's path operand; reads nothing",
	"internal/host/sandbox/sandbox.go":    "a bind source the sandbox refuses; reads nothing",
	"internal/testkit/e2etest/harness.go": "the end-to-end harness inspects the test machine's processes; the suites run on Linux",
}

// TestLinuxInterfacesInLinuxFiles: a Go file that is built for macOS
// (not a _linux.go file, no linux build constraint) names no Linux-only
// path such as /proc or a cgroup mount. Such code belongs in a _linux.go
// file behind a small per-OS function, so that a port fails to build
// where it lacks one instead of failing at run time (the cross-build gate
// catches missing symbols; this catches the strings it cannot).
func TestLinuxInterfacesInLinuxFiles(t *testing.T) {
	darwin := build.Default
	darwin.GOOS, darwin.GOARCH, darwin.CgoEnabled = "darwin", "arm64", false
	root := filepath.Join("..", "..", "..")
	used := map[string]bool{}
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "bench" || rel == "e2e" || strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if ok, err := darwin.MatchFile(filepath.Dir(path), d.Name()); err != nil || !ok {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, p := range linuxPaths {
				if s == p || strings.HasPrefix(s, p) && strings.HasSuffix(p, "/") || s == p+"/" {
					if _, ok := linuxPathsAllowed[rel]; ok {
						used[rel] = true
						return true
					}
					t.Errorf("%s: %q in a file built for macOS: move the code into a _linux.go file behind a per-OS function", fset.Position(lit.Pos()), s)
				}
			}
			return true
		})
		return nil
	})
	for rel := range linuxPathsAllowed {
		if !used[rel] {
			t.Errorf("linuxPathsAllowed entry %s matches nothing: remove it", rel)
		}
	}
}
