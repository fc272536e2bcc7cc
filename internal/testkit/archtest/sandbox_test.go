package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The sandbox tree (docs/architecture.md): internal/host/sandbox holds what
// every backend shares; each backend is a subpackage of it that
// registers itself with sandbox.Register; internal/host/sandbox/backends is
// the one list of them; internal/host/sandbox/initproc is `conch
// sandbox-init`, which calls into the backends for their in-sandbox
// steps.

const sandboxRoot = mod + "/internal/host/sandbox"

// sandboxNonBackends are the subpackages of internal/host/sandbox that are not
// backends. Every other subpackage is one.
var sandboxNonBackends = []string{
	sandboxRoot + "/backends",
	sandboxRoot + "/initproc",
}

// backendImporters may import a backend package directly: the sandbox
// tree itself, the host layer (the sandbox host reads a backend's own
// extras, such as docker's in-container kill) and the programs' wiring.
var backendImporters = []string{
	sandboxRoot + "/",
	mod + "/internal/host",
	mod + "/internal/cli",
	mod + "/cmd/",
}

func isSandboxBackend(p string) bool {
	return strings.HasPrefix(p, sandboxRoot+"/") && !slices.Contains(sandboxNonBackends, p)
}

// TestSandboxBackendsApart: a backend never imports another backend
// (directly or through another package); outside the sandbox tree, the
// host layer and the programs, nothing imports a backend directly (it
// asks sandbox.For or sandbox.New, and a backend's extras go through an
// interface of internal/host/sandbox such as sandbox.Containers); and every
// backend is in the list of internal/host/sandbox/backends (in a file of any
// OS: seatbelt is listed in backends_darwin.go), so every program that
// asks sandbox.For knows it on the OS it runs on.
func TestSandboxBackendsApart(t *testing.T) {
	pkgs := listPackages(t)
	var found []string
	var listed []string
	for _, p := range pkgs {
		if isSandboxBackend(p.ImportPath) {
			found = append(found, p.ImportPath)
			for _, d := range p.Deps {
				if isSandboxBackend(d) && d != p.ImportPath {
					t.Errorf("sandbox backend %s depends on backend %s: backends share code only through internal/host/sandbox", p.ImportPath, d)
				}
			}
		}
		if hasPrefix(p.ImportPath, backendImporters) {
			continue
		}
		for _, imp := range p.Imports {
			if isSandboxBackend(imp) {
				t.Errorf("%s imports the sandbox backend %s: use sandbox.For or sandbox.New, and an interface of internal/host/sandbox for its extras", p.ImportPath, imp)
			}
		}
	}
	if len(found) < 4 {
		t.Fatalf("found the sandbox backends %v: expected bwrap, docker, landlock and seatbelt at least", found)
	}
	listed = backendsListed(t)
	for _, b := range found {
		if !slices.Contains(listed, b) {
			t.Errorf("sandbox backend %s is not imported by %s/backends, so sandbox.For does not know it", b, sandboxRoot)
		}
	}
}

// backendsListed returns what the files of internal/host/sandbox/backends
// import, whatever OS each is built for.
func backendsListed(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join("..", "..", "host", "sandbox", "backends")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out = append(out, p)
		}
	}
	return out
}
