package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// conformanceScenarios are the server scenarios of the MCP conformance
// runner that apply to a server other than its reference server. The
// others (tools-call-*, prompts-get-*, resources-read-*, completion,
// elicitation, subscribe) call tools, prompts and resources that only the
// reference server has. prompts-list and resources-list pass as well but
// only check that the lists are well formed, and conch has neither.
var conformanceScenarios = []string{
	"server-initialize",
	"ping",
	"tools-list",
	// Also generic: logging/setLevel, two concurrent POST SSE streams on
	// one session, and Host/Origin validation (the proxy below keeps the
	// runner's Host and Origin headers).
	"logging-set-level",
	"server-sse-multiple-streams",
	"dns-rebinding-protection",
}

// conformanceCheck is one entry of the runner's checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, INFO, SKIPPED
	ErrorMessage string `json:"errorMessage"`
}

// bearerProxy serves a loopback reverse proxy to target that adds the
// bearer token to every request. The conformance runner (0.1.x) has no way
// to send a header: no --header flag and no environment variable; its
// client is a bare StreamableHTTPClientTransport. conch serve has no mode
// without tokens, so the token is added on the way. The proxy streams
// (FlushInterval -1) so SSE answers pass unchanged.
func bearerProxy(t *testing.T, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			// Keep the client's Host so that conch's Host and Origin
			// checks see what the runner sent (the dns-rebinding scenario
			// pairs them).
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1,
		// The runner drops its GET event stream when it closes; that
		// cancellation is not an error worth printing.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "conformance proxy: %s %s: %v\n", r.Method, r.URL.Path, err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestConformance runs the applicable scenarios of the MCP conformance
// runner (@modelcontextprotocol/conformance, installed in e2e/) against
// `conch serve`, and fails on any FAILURE check.
func TestConformance(t *testing.T) {
	node, dir := e2eNode(t, "@modelcontextprotocol/conformance")
	runner := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(runner); err != nil {
		t.Skipf("conformance runner entry point missing: %v", err)
	}
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	endpoint := bearerProxy(t, g.Base, g.Token) + "/mcp"

	for _, sc := range conformanceScenarios {
		t.Run(sc, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, runner, "server", "--url", endpoint, "--scenario", sc, "-o", out)
			cmd.Dir = t.TempDir()
			var combined bytes.Buffer
			cmd.Stdout, cmd.Stderr = &combined, &combined
			runErr := cmd.Run()
			files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
			if len(files) != 1 {
				t.Fatalf("runner: %v; want one checks.json under %s, got %v\n%s", runErr, out, files, combined.String())
			}
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			var checks []conformanceCheck
			if err := json.Unmarshal(b, &checks); err != nil {
				t.Fatalf("checks.json: %v\n%s", err, b)
			}
			if len(checks) == 0 {
				t.Fatalf("no checks ran\n%s", combined.String())
			}
			failed := 0
			for _, c := range checks {
				t.Logf("%-8s %s (%s) %s", c.Status, c.ID, c.Name, c.ErrorMessage)
				if c.Status == "FAILURE" {
					failed++
				}
			}
			if failed > 0 || runErr != nil {
				t.Errorf("%d failed checks (runner: %v)\n%s", failed, runErr, combined.String())
			}
		})
	}
}
