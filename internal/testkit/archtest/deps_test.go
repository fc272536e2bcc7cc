package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Each program's dependency closure is a committed list (tailscale's
// depaware idea): a package entering a program changes its list in the
// same commit, where a reviewer sees it. The lists hold the packages
// outside the standard library, as `go list -deps` finds them for
// linux/amd64 without cgo; CONCH_UPDATE_DEPS=1 rewrites them:
//
//	CONCH_UPDATE_DEPS=1 go test ./internal/testkit/archtest -run TestProgramDeps

// programs are the module's programs with a committed list, and what each
// may never link, standard library included (prefixes).
var programs = []struct {
	pkg    string
	banned []string
	why    string
}{
	{
		pkg: mod + "/cmd/conch-shim",
		// What runs under every command starts in a few milliseconds:
		// no network protocol, no Kubernetes, no exporter, no MCP.
		banned: []string{"k8s.io/", "sigs.k8s.io/", "google.golang.org/grpc", "google.golang.org/protobuf",
			"go.opentelemetry.io/", "github.com/modelcontextprotocol/", "github.com/coder/websocket",
			"net/http", "github.com/spf13/", "github.com/prometheus/", mod + "/engine", mod + "/internal/cli"},
		why: "conch-shim runs under every command (docs/performance.md)",
	},
	{
		pkg: mod + "/cmd/conch",
		// client-go's typed clientset and discovery client register every
		// Kubernetes API group at start (half of the binary, 3.5 ms of
		// every conch start); internal/host/kube reaches its few resources
		// through the dynamic client (internal/host/kube/typed.go).
		banned: []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/discovery", "k8s.io/client-go/informers"},
		why:    "the conch binary starts for every CLI call (docs/performance.md)",
	},
}

func goListDeps(t *testing.T, pkg string, std bool) []string {
	t.Helper()
	f := `{{if not .Standard}}{{.ImportPath}}{{end}}`
	if std {
		f = `{{.ImportPath}}`
	}
	cmd := exec.Command("go", "list", "-deps", "-f", f, pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var deps []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && l != pkg {
			deps = append(deps, l)
		}
	}
	slices.Sort(deps)
	return deps
}

func TestProgramDeps(t *testing.T) {
	for _, p := range programs {
		t.Run(filepath.Base(p.pkg), func(t *testing.T) {
			file := filepath.Join("..", "..", "..", strings.TrimPrefix(p.pkg, mod+"/"), "deps.txt")
			for _, d := range goListDeps(t, p.pkg, true) {
				for _, b := range p.banned {
					if d == b || strings.HasPrefix(d, b) && (strings.HasSuffix(b, "/") || strings.HasPrefix(d, b+"/")) {
						t.Errorf("%s links %s, which %s may not (%s)", p.pkg, d, filepath.Base(p.pkg), p.why)
					}
				}
			}
			got := goListDeps(t, p.pkg, false)
			text := "# The packages outside the standard library that " + filepath.Base(p.pkg) + " links (linux/amd64),\n" +
				"# checked by internal/testkit/archtest (TestProgramDeps); CONCH_UPDATE_DEPS=1 rewrites this file.\n" +
				strings.Join(got, "\n") + "\n"
			if os.Getenv("CONCH_UPDATE_DEPS") == "1" {
				if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (CONCH_UPDATE_DEPS=1 writes it)", err)
			}
			var want []string
			for _, l := range strings.Split(string(b), "\n") {
				if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
					want = append(want, l)
				}
			}
			for _, d := range got {
				if !slices.Contains(want, d) {
					t.Errorf("%s now links %s, which %s does not list: add it on purpose (CONCH_UPDATE_DEPS=1) or drop the import", p.pkg, d, file)
				}
			}
			for _, d := range want {
				if !slices.Contains(got, d) {
					t.Errorf("%s lists %s, which %s no longer links (CONCH_UPDATE_DEPS=1 rewrites the list)", file, d, p.pkg)
				}
			}
		})
	}
}
