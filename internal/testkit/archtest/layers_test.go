package archtest

import (
	"slices"
	"strings"
	"testing"
)

// The layers (docs/architecture.md): adapters translate a protocol to and
// from the engine; the engine holds the tools' semantics; below it the
// host layer (internal/host) and the parts it drives (sandbox,
// supervisor, journal) and the leaves.

// adapters are the packages that may speak a network protocol: import
// net/http, a WebSocket library or the MCP SDK. Prefixes; cmd/ and bench/
// are programs.
var adapters = []string{
	mod + "/cmd/",
	mod + "/bench/",
	mod + "/internal/adapter/httpapi",
	mod + "/internal/adapter/mcpserver",
	mod + "/internal/adapter/ui",
	mod + "/internal/node/link",
	// The programs' commands (conch serve, mcp, node, the client
	// commands): they wire the adapters together.
	mod + "/internal/cli",
	// The client side of the wait probes (engine.Probes).
	mod + "/internal/adapter/waitprobe",
	// The Go client of conch's HTTP API.
	mod + "/client",
}

// e2eHarness is the end-to-end tests' harness: non-test files (so that
// every end-to-end package under e2e/ can import it), imported only by
// tests (TestTestHelpersOnlyInTests: its name ends in "test").
const e2eHarness = mod + "/internal/testkit/e2etest"

// protocolExceptions are packages outside adapters that still speak a
// protocol, each with the reason.
var protocolExceptions = map[string]string{
	e2eHarness: "a client of the conch processes the tests start: MCP, HTTP and the node WebSocket, as a real client speaks them",
}

// protocols are the imports only adapters may have.
var protocols = []string{"net/http", "github.com/coder/websocket", "github.com/modelcontextprotocol/"}

// aboveEngine are the packages that may import the engine: adapters and
// the use cases they share. Every other package of the module is below
// it and must not depend on it.
var aboveEngine = append([]string{
	mod + "/engine",
	mod + "/e2e",
	// The harness drives the whole binary and runs the CLI's exit-code
	// table (internal/cli) in process.
	e2eHarness,
	mod + "/internal/admin",
	mod + "/internal/testkit/archtest",
}, adapters...)

// engineExceptions are packages below the engine that still import it,
// each with the reason (none now).
var engineExceptions = map[string]string{}

func hasPrefix(p string, prefixes []string) bool {
	for _, x := range prefixes {
		if p == x || strings.HasSuffix(x, "/") && strings.HasPrefix(p, x) || strings.HasPrefix(p, x+"/") {
			return true
		}
	}
	return false
}

// TestOnlyAdaptersSpeakProtocols: net/http, WebSockets and the MCP SDK
// are imported by adapters only (directly: the engine's tracing exporter
// uses net/http inside its own library, which is not the engine speaking
// HTTP).
func TestOnlyAdaptersSpeakProtocols(t *testing.T) {
	for _, p := range listPackages(t) {
		if hasPrefix(p.ImportPath, adapters) {
			continue
		}
		if _, ok := protocolExceptions[p.ImportPath]; ok {
			continue
		}
		for _, imp := range p.Imports {
			if hasPrefix(imp, protocols) {
				t.Errorf("%s imports %s: only adapters speak a protocol (docs/architecture.md)", p.ImportPath, imp)
			}
		}
	}
}

// TestNothingBelowImportsEngine: the host layer, sandbox, supervisor,
// journal and every leaf stay below the engine, so each can be built and
// tested without it.
func TestNothingBelowImportsEngine(t *testing.T) {
	for _, p := range listPackages(t) {
		if hasPrefix(p.ImportPath, aboveEngine) {
			continue
		}
		if _, ok := engineExceptions[p.ImportPath]; ok {
			continue
		}
		for _, d := range p.Deps {
			if d == mod+"/engine" || strings.HasPrefix(d, mod+"/internal/adapter/httpapi") || strings.HasPrefix(d, mod+"/internal/adapter/mcpserver") {
				t.Errorf("%s depends on %s: it is below the engine (docs/architecture.md)", p.ImportPath, d)
			}
		}
	}
}

// TestHostLayer: internal/host is below the engine and speaks no
// protocol, whatever lists above change.
func TestHostLayer(t *testing.T) {
	found := false
	for _, p := range listPackages(t) {
		if p.ImportPath != mod+"/internal/host" {
			continue
		}
		found = true
		for _, d := range p.Deps {
			if d == mod+"/engine" || hasPrefix(d, adapters) {
				t.Errorf("internal/host depends on %s", d)
			}
		}
		for _, imp := range p.Imports {
			if hasPrefix(imp, protocols) {
				t.Errorf("internal/host imports %s", imp)
			}
		}
	}
	if !found {
		t.Fatal("internal/host is missing")
	}
}

// protocolAdapters are the adapters proper: they translate a protocol to
// and from the engine (or the admin use cases) and never reach past them
// into how a command is supervised or journaled.
var protocolAdapters = []string{
	mod + "/internal/adapter/httpapi",
	mod + "/internal/adapter/mcpserver",
	mod + "/internal/adapter/ui",
	mod + "/internal/node/link",
	mod + "/internal/adapter/waitprobe",
	mod + "/client",
}

// TestAdaptersStayAboveTheEngine: an adapter does not import the
// supervisor or the journal (directly: the engine does, beneath it).
func TestAdaptersStayAboveTheEngine(t *testing.T) {
	below := []string{mod + "/internal/session/supervisor", mod + "/internal/session/journal"}
	seen := 0
	for _, p := range listPackages(t) {
		if !hasPrefix(p.ImportPath, protocolAdapters) {
			continue
		}
		seen++
		for _, imp := range p.Imports {
			if hasPrefix(imp, below) {
				t.Errorf("%s imports %s: an adapter goes through the engine (docs/architecture.md)", p.ImportPath, imp)
			}
		}
	}
	if seen < len(protocolAdapters) {
		t.Errorf("found %d of the %d adapters: update protocolAdapters", seen, len(protocolAdapters))
	}
}

// TestSupervisorVocabularyIsALeaf: the supervisor's vocabulary
// (internal/session/supervisor/proto: the spec, the control messages, the end
// states, the session files) depends on no conch package but the leaves it
// names, so a package that only speaks of sessions (the registry, the node
// port) never imports the supervisor that runs them.
func TestSupervisorVocabularyIsALeaf(t *testing.T) {
	leaves := []string{mod + "/internal/base/fsutil", mod + "/internal/session/journal", mod + "/internal/term/keys", mod + "/internal/term/vt"}
	speakers := []string{mod + "/internal/session/registry", mod + "/internal/node/port"}
	found := 0
	for _, p := range listPackages(t) {
		switch {
		case p.ImportPath == mod+"/internal/session/supervisor/proto":
			found++
			for _, d := range p.Deps {
				if strings.HasPrefix(d, mod+"/") && !slices.Contains(leaves, d) {
					t.Errorf("internal/session/supervisor/proto depends on %s: it is a leaf (only %v)", d, leaves)
				}
			}
		case slices.Contains(speakers, p.ImportPath):
			found++
			for _, d := range p.Deps {
				if d == mod+"/internal/session/supervisor" {
					t.Errorf("%s depends on internal/session/supervisor: name sessions with internal/session/supervisor/proto", p.ImportPath)
				}
			}
		}
	}
	if found != 1+len(speakers) {
		t.Errorf("found %d of the %d packages checked: update the test", found, 1+len(speakers))
	}
}
