package archtest

import (
	"slices"
	"strings"
	"testing"
)

// The node packages and their transport. The node hub (gateway side) and
// the node host (node side) sit below the engine: the engine reaches them
// through internal/nodeport's interface and cmd/conch wires them, so
// neither imports the engine. Neither speaks HTTP or WebSocket itself:
// internal/nodelink is the transport of both sides, and the HTTP adapter
// hands the hub its connections through it.
var nodePackages = []string{mod + "/internal/nodehub", mod + "/internal/nodehost", mod + "/internal/nodelink", mod + "/internal/nodeport"}

// websocketImporters are the only packages that may import the WebSocket
// library: the node transport and the HTTP adapters.
var websocketImporters = []string{mod + "/internal/nodelink", mod + "/internal/httpapi", mod + "/internal/ui", mod + "/internal/mcpserver"}

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
		if p.ImportPath == mod+"/internal/nodelink" {
			continue
		}
		for _, d := range p.Imports {
			if d == "net/http" || strings.HasPrefix(d, "net/http/") || strings.HasPrefix(d, "github.com/coder/websocket") {
				t.Errorf("%s imports %s: node links go through internal/nodelink", p.ImportPath, d)
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
// client; production code calls the real thing in process instead.
// (go list's Imports are those of the non-test files.)
func TestNoHTTPTestInProduction(t *testing.T) {
	for _, p := range listPackages(t) {
		if slices.Contains(p.Imports, "net/http/httptest") {
			t.Errorf("%s imports net/http/httptest outside its tests", p.ImportPath)
		}
	}
}
