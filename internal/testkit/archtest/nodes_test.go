package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The node packages and their transport. The node hub (gateway side) and
// the node host (node side) sit below the engine: the engine reaches them
// through internal/node/port's interface and cmd/conch wires them, so
// neither imports the engine. Neither speaks HTTP or WebSocket itself:
// internal/node/link is the transport of both sides, and the HTTP adapter
// hands the hub its connections through it.
var nodePackages = []string{mod + "/internal/node/hub", mod + "/internal/node/agent", mod + "/internal/node/link", mod + "/internal/node/port"}

// websocketImporters are the only packages that may import the WebSocket
// library: the node transport and the HTTP adapters, and the end-to-end
// harness, which speaks the node protocol to a gateway as a node would
// (and as a hostile one does).
var websocketImporters = []string{mod + "/internal/node/link", mod + "/internal/adapter/httpapi", mod + "/internal/adapter/ui", mod + "/internal/adapter/mcpserver", e2eHarness}

func TestNodePackagesBelowEngine(t *testing.T) {
	seen := 0
	for _, p := range listPackages(t) {
		if !slices.Contains(nodePackages, p.ImportPath) {
			continue
		}
		seen++
		for _, d := range p.Deps {
			if d == mod+"/engine" || strings.HasPrefix(d, mod+"/engine/") || strings.HasPrefix(d, mod+"/cmd/") {
				t.Errorf("%s depends on %s: the node packages sit below the engine", p.ImportPath, d)
			}
		}
		if p.ImportPath == mod+"/internal/node/link" {
			continue
		}
		for _, d := range p.Imports {
			if d == "net/http" || strings.HasPrefix(d, "net/http/") || strings.HasPrefix(d, "github.com/coder/websocket") {
				t.Errorf("%s imports %s: node links go through internal/node/link", p.ImportPath, d)
			}
		}
	}
	if seen != len(nodePackages) {
		t.Fatalf("found %d of the node packages %v", seen, nodePackages)
	}
}

func TestWebSocketOnlyInTransportAndAdapters(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, d := range p.Imports {
			if strings.HasPrefix(d, "github.com/coder/websocket") && !slices.Contains(websocketImporters, p.ImportPath) {
				t.Errorf("%s imports %s: only %v may", p.ImportPath, d, websocketImporters)
			}
		}
	}
}

// TestNoHTTPTestInProduction: net/http/httptest fakes a server or a
// client, and the testing packages serve tests; production code calls the
// real thing in process instead. (go list's Imports are those of the
// non-test files; the module's own test helpers, whose names end in
// "test", may use them.)
func TestNoHTTPTestInProduction(t *testing.T) {
	for _, p := range listPackages(t) {
		if strings.HasSuffix(p.ImportPath, "test") {
			continue
		}
		for _, d := range p.Imports {
			if d == "net/http/httptest" || d == "testing" || strings.HasPrefix(d, "testing/") {
				t.Errorf("%s imports %s outside its tests", p.ImportPath, d)
			}
		}
	}
}

// TestNodeHostReadsSessionsThroughAPIs: the node host learns a session's
// state from its engine and reads its output through
// proto.ReadOutput; it never reads the session directory's files
// itself, whose writing the supervisor may defer (an end state read from
// exit.json came up to a poll interval late).
func TestNodeHostReadsSessionsThroughAPIs(t *testing.T) {
	banned := map[string][]string{
		"proto":   {"ReadExit", "MetaPath", "ExitPath", "JournalDir", "SessionDir", "LogPath"},
		"journal": {"Read", "ReadAll", "ReadTail", "ReadEnd", "Stat", "Create"},
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("../../node/agent/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no nodehost sources: %v", err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && slices.Contains(banned[x.Name], sel.Sel.Name) {
				t.Errorf("%s: nodehost uses %s.%s: read sessions through the engine and proto.ReadOutput", fset.Position(sel.Pos()), x.Name, sel.Sel.Name)
			}
			return true
		})
	}
}
