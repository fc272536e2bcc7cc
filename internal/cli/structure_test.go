package cli

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const mod = "github.com/conchsh/conch"

// imports returns the module-internal imports of the non-test Go files
// matching pattern, by file.
func moduleImports(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s: %v", pattern, err)
	}
	out := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = nil
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(p, mod+"/") {
				out[f] = append(out[f], strings.TrimPrefix(p, mod+"/"))
			}
		}
	}
	return out
}

// TestMainIsDispatchOnly: cmd/conch holds no command: it reaches the
// module only through internal/cli and the shim's entry points
// (supervise, sandbox-init); cmd/conch-shim only through the latter.
func TestMainIsDispatchOnly(t *testing.T) {
	for prog, allowed := range map[string]map[string]bool{
		"conch":      {"internal/cli": true, "internal/session/shim/entry": true},
		"conch-shim": {"internal/session/shim": true, "internal/session/shim/entry": true},
	} {
		for f, ims := range moduleImports(t, filepath.Join("..", "..", "cmd", prog, "*.go")) {
			for _, im := range ims {
				if !allowed[im] {
					t.Errorf("%s imports %s: commands belong in internal/cli", f, im)
				}
			}
		}
	}
}

// TestClientCommandsUseOnlyTheClient: the client commands reach an engine
// only through package client (conn.go picks the gateway, the socket or
// an engine of this process served over its own API): their files import
// no engine, adapter, store or journal.
func TestClientCommandsUseOnlyTheClient(t *testing.T) {
	ims := moduleImports(t, "*.go")
	for _, f := range []string{"exec.go", "session.go", "patch.go", "agents.go", "ui.go"} {
		got, ok := ims[f]
		if !ok {
			t.Fatalf("%s is missing", f)
		}
		for _, im := range got {
			if im != "client" && im != "apitype" && im != "patch" {
				t.Errorf("%s imports %s; client commands talk through package client only", f, im)
			}
		}
	}
}
