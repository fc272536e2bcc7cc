package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/conchsh/conch"

type pkg struct {
	ImportPath string
	Name       string
	Doc        string
	Dir        string
	GoFiles    []string
	Deps       []string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// forbidden maps a package (prefix) to import prefixes it may never depend
// on, directly or indirectly.
var forbidden = map[string][]string{
	mod + "/apitype":                  {mod + "/", "github.com/", "golang.org/"},
	mod + "/internal/session/journal": {mod + "/", "github.com/", "golang.org/"},
	mod + "/internal/term/render":     {mod + "/", "github.com/", "golang.org/"},
	mod + "/internal/term/keys":       {mod + "/", "github.com/", "golang.org/"},
	mod + "/internal/session/slug":    {mod + "/", "github.com/", "golang.org/"},
	mod + "/internal/term/visible":    {mod + "/", "github.com/", "golang.org/"},
	mod + "/internal/host/shellenv":   {mod + "/", "github.com/", "golang.org/", "net/"},
	mod + "/internal/config":          {mod + "/", "github.com/", "golang.org/"},
	mod + "/internal/store/approvals": {mod + "/", "github.com/", "golang.org/"},
	mod + "/internal/store/ledger":    {mod + "/", "github.com/", "golang.org/"},
	mod + "/policy":                   {mod + "/", "os/exec", "net/http", "github.com/modelcontextprotocol/"},
	mod + "/client":                   {mod + "/engine", mod + "/internal/", mod + "/policy", "github.com/", "golang.org/"},
	mod + "/internal/store/auth":      {mod + "/", "github.com/", "golang.org/"},
	mod + "/internal/base/fsutil":     {mod + "/", "github.com/", "golang.org/"},
	// apply_patch is pure: standard library only.
	mod + "/patch":                       {mod + "/", "github.com/", "golang.org/", "net/", "os/exec"},
	mod + "/internal/testkit/patchgen":   {mod + "/", "github.com/", "golang.org/"},
	mod + "/internal/session/supervisor": {mod + "/engine", mod + "/internal/adapter/mcpserver", "github.com/modelcontextprotocol/", "net/http"},
	// The engine never imports the adapters, nor the operator use cases
	// above it; its wait probes are an interface an adapter implements
	// (layers_test.go).
	mod + "/engine": {mod + "/internal/adapter/mcpserver", mod + "/internal/adapter/httpapi", mod + "/internal/adapter/waitprobe", mod + "/internal/admin", mod + "/cmd", "github.com/modelcontextprotocol/"},
	// The host layer is below the engine.
	mod + "/internal/host": {mod + "/engine", mod + "/internal/adapter/mcpserver", mod + "/internal/adapter/httpapi", mod + "/cmd", "github.com/modelcontextprotocol/", "github.com/coder/websocket"},
	// The registry is below the engine: no engine, no adapter, no network.
	mod + "/internal/session/registry": {mod + "/engine", mod + "/internal/admin", mod + "/internal/adapter/mcpserver", mod + "/internal/adapter/httpapi", mod + "/internal/node/hub", mod + "/internal/node/agent", mod + "/cmd", "net/http", "github.com/modelcontextprotocol/"},
	// The operator use cases are above the engine and below the adapters.
	mod + "/internal/admin": {mod + "/internal/adapter/mcpserver", mod + "/internal/adapter/httpapi", mod + "/internal/adapter/ui", mod + "/cmd", "github.com/modelcontextprotocol/"},
}

func TestLayering(t *testing.T) {
	for _, p := range listPackages(t) {
		for prefix, bans := range forbidden {
			if p.ImportPath != prefix {
				continue
			}
			for _, d := range p.Deps {
				for _, ban := range bans {
					if strings.HasPrefix(d, ban) && !allowedLeaf(p.ImportPath, d) {
						t.Errorf("%s depends on %s (forbidden: %s)", p.ImportPath, d, ban)
					}
				}
			}
		}
	}
}

// allowedLeaf lists the exceptions to the rules above: the leaves a core
// package may use.
func allowedLeaf(pkg, dep string) bool {
	// The file-system primitives (atomic writer, flock) are a standard-library leaf every package shares.
	if dep == mod+"/internal/base/fsutil" {
		return true
	}
	// The JSON Schemas of config.json and exec-approvals.json are inferred
	// from the types that parse them (jsonschema-go imports only the
	// standard library).
	if (pkg == mod+"/internal/config" || pkg == mod+"/internal/store/approvals") && dep == "github.com/google/jsonschema-go/jsonschema" {
		return true
	}
	switch pkg {
	case mod + "/client":
		return dep == mod+"/apitype"
	case mod + "/internal/config":
		// Node bindings in config.json are checked with the wire types'
		// reference rules (apitype is itself a leaf).
		return dep == mod+"/apitype"
	case mod + "/internal/term/render", mod + "/internal/term/keys":
		// The terminal-sequence parser (charmbracelet/x/ansi) and what it
		// imports itself: character widths, graphemes, colours.
		for _, p := range []string{"github.com/charmbracelet/x/ansi", "github.com/clipperhouse/", "github.com/lucasb-eyer/go-colorful", "github.com/mattn/go-runewidth", "github.com/rivo/uniseg"} {
			if strings.HasPrefix(dep, p) {
				return true
			}
		}
	}
	return false
}

func TestEveryPackageDocumented(t *testing.T) {
	for _, p := range listPackages(t) {
		if p.Doc == "" {
			t.Errorf("package %s has no package doc comment", p.ImportPath)
		}
	}
}
