package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// e2eNode returns the node binary and the absolute path of the repository's
// e2e/ npm project, or skips the test with the reason when either is
// missing. .ci/run installs them (`npm ci --prefix e2e`); locally run
// `npm ci --prefix e2e --no-audit --no-fund` once.
func e2eNode(t *testing.T, pkg string) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (needed for the cross-client e2e checks)")
	}
	dir, err = filepath.Abs(filepath.Join("..", "..", "e2e"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json")); err != nil {
		t.Skipf("%s is not installed in %s/node_modules: run `npm ci --prefix e2e --no-audit --no-fund`", pkg, dir)
	}
	return node, dir
}

// tsSummary is the JSON summary printed by e2e/ts-client.mjs.
type tsSummary struct {
	OK     bool     `json:"ok"`
	Tools  []string `json:"tools"`
	Server struct {
		Name string `json:"name"`
	} `json:"server"`
	ProtocolVersion string `json:"protocolVersion"`
	Echo            struct {
		Text    string `json:"text"`
		IsError bool   `json:"isError"`
	} `json:"echo"`
	Background struct {
		SessionID string   `json:"sessionId"`
		Polls     int      `json:"polls"`
		Status    string   `json:"status"`
		ExitCode  *int     `json:"exitCode"`
		Output    []string `json:"output"`
	} `json:"background"`
	Notification struct {
		SetLevel  bool   `json:"setLevel"`
		Received  bool   `json:"received"`
		SessionID string `json:"sessionId"`
		Logger    string `json:"logger"`
		Kind      string `json:"kind"`
		Text      string `json:"text"`
	} `json:"notification"`
	Schema struct {
		Calls        int                       `json:"calls"`
		Errors       []string                  `json:"errors"`
		Instructions int                       `json:"instructions"`
		Annotations  map[string]map[string]any `json:"annotations"`
	} `json:"schema"`
	RunningAfter []string `json:"runningAfter"`
	Failures     []string `json:"failures"`
}

// TestTypeScriptClient drives `conch serve` with the official TypeScript MCP
// SDK client (e2e/ts-client.mjs) over streamable HTTP with the agent token.
func TestTypeScriptClient(t *testing.T) {
	node, dir := e2eNode(t, "@modelcontextprotocol/sdk")
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "ts-client.mjs"))
	cmd.Dir = dir
	// The token goes through the environment, not argv.
	cmd.Env = append(os.Environ(), "CONCH_MCP_URL="+g.Base+"/mcp", "CONCH_TOKEN="+g.Token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var s tsSummary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("ts-client: %v; no JSON summary (%v)\nstdout:\n%s\nstderr:\n%s", runErr, err, stdout.String(), stderr.String())
	}
	t.Logf("ts-client summary:\n%s", stdout.String())
	if runErr != nil || !s.OK || len(s.Failures) > 0 {
		t.Fatalf("ts-client failed (%v): %v\nstderr:\n%s", runErr, s.Failures, stderr.String())
	}
	if s.Server.Name != "conch" || s.ProtocolVersion == "" {
		t.Errorf("server %q, protocol %q", s.Server.Name, s.ProtocolVersion)
	}
	if strings.Join(s.Tools, ",") != "exec,process" {
		t.Errorf("tools: %v", s.Tools)
	}
	if s.Echo.Text != "ts-hi" || s.Echo.IsError {
		t.Errorf("echo: %+v", s.Echo)
	}
	bg := s.Background
	if bg.SessionID == "" || bg.Polls < 1 || bg.Status != "completed" || bg.ExitCode == nil || *bg.ExitCode != 0 || strings.Join(bg.Output, ",") != "bg-1,bg-2" {
		t.Errorf("background: %+v", bg)
	}
	n := s.Notification
	if !n.SetLevel || !n.Received || n.Logger != "conch.exec" || n.Kind != "completed" ||
		n.Text != "Exec completed ("+n.SessionID+", code 0) :: ts-notice" {
		t.Errorf("exit notice: %+v", n)
	}
	if len(s.RunningAfter) > 0 {
		t.Errorf("running after: %v", s.RunningAfter)
	}
	// The TypeScript SDK validated every result of every process action
	// (and failures) against the tool's outputSchema.
	if s.Schema.Calls < 20 || len(s.Schema.Errors) > 0 || s.Schema.Instructions == 0 {
		t.Errorf("schema checks: %+v", s.Schema)
	}
	if a := s.Schema.Annotations["exec"]; a["destructiveHint"] != true || a["openWorldHint"] != true || a["title"] == nil {
		t.Errorf("exec annotations as the TypeScript client sees them: %v", a)
	}
	// The HTTP API agrees: nothing of the agent is still running.
	code, m := g.Do("GET", "/v1/sessions", g.Token, nil, nil)
	if code != 200 {
		t.Fatalf("GET /v1/sessions: %d %v", code, m)
	}
	d, _ := m["details"].(map[string]any)
	sessions, _ := d["sessions"].([]any)
	for _, x := range sessions {
		if e, _ := x.(map[string]any); e["status"] == "running" {
			t.Errorf("session still running: %v", e)
		}
	}
	// The foreground `echo ts-hi` is not listed; the two background runs are.
	if len(sessions) != 2 {
		t.Errorf("want the 2 background sessions of ts-client, got %d: %v", len(sessions), m)
	}
}
