package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

func TestServeMCPOverHTTP(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	c := g.MCPClient(g.Token)
	res, err := c.CS.ListTools(t.Context(), nil)
	if err != nil || len(res.Tools) != 2 {
		t.Fatalf("tools: %v %v", res, err)
	}
	if r := c.Exec(map[string]any{"command": "echo over-http"}); r.Text != "over-http" {
		t.Fatalf("exec: %q", r.Text)
	}
	r := c.Exec(map[string]any{"command": "echo start; sleep 913.1", "background": true})
	id := r.Str("sessionId")
	e2etest.Eventually(t, 5*time.Second, func() string {
		if l := c.Process(map[string]any{"action": "log", "sessionId": id}); l.Text != "start" {
			return "log: " + l.Text
		}
		return ""
	})
	if k := c.Process(map[string]any{"action": "kill", "sessionId": id}); k.Text != "Killed session "+id+"." {
		t.Fatalf("kill: %q", k.Text)
	}
	// The HTTP API sees the same session.
	code, m := g.Do("GET", "/v1/sessions/"+id, g.Token, nil, nil)
	if code != 200 || m["state"] != "killed" {
		t.Fatalf("GET session: %d %v", code, m)
	}
}

func TestServeAuthAndBrowserChecks(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	cases := []struct {
		name, method, path, token string
		hdr                       map[string]string
		body                      any
		want                      int
	}{
		{"health needs no token", "GET", "/v1/health", "", nil, nil, 200},
		{"no token", "GET", "/v1/sessions", "", nil, nil, 401},
		{"bad token", "GET", "/v1/sessions", "cat_nope", nil, nil, 401},
		{"agent token", "GET", "/v1/sessions", g.Token, nil, nil, 200},
		{"agent on operator route", "GET", "/v1/approvals", g.Token, nil, nil, 403},
		{"operator route", "GET", "/v1/approvals", g.Operator, nil, nil, 200},
		{"metrics need operator", "GET", "/metrics", g.Token, nil, nil, 403},
		{"rebinding Host", "GET", "/v1/sessions", g.Token, map[string]string{"Host": "evil.example:80"}, nil, 403},
		{"cross-site Origin", "POST", "/v1/exec", g.Token, map[string]string{"Origin": "https://evil.example"}, map[string]any{"command": "true"}, 403},
		{"operator token on /mcp", "POST", "/mcp", g.Operator, nil, map[string]any{}, 403},
		{"unknown field", "POST", "/v1/exec", g.Token, nil, map[string]any{"command": "true", "cwd": "/"}, 400},
		{"not found", "POST", "/v1/sessions/nope/kill", g.Token, nil, map[string]any{}, 404},
		{"nodes need operator", "GET", "/v1/nodes", g.Token, nil, nil, 403},
		{"nodes list", "GET", "/v1/nodes", g.Operator, nil, nil, 200},
		{"node connect needs a node token", "GET", "/v1/nodes/connect", g.Token, nil, nil, 401},
	}
	for _, c := range cases {
		if code, m := g.Do(c.method, c.path, c.token, c.body, c.hdr); code != c.want {
			t.Errorf("%s: %d %v, want %d", c.name, code, m, c.want)
		}
	}
	big := map[string]any{"command": strings.Repeat("x", 5<<20)}
	if code, _ := g.Do("POST", "/v1/exec", g.Token, big, nil); code != 413 {
		t.Errorf("5 MiB body: %d, want 413", code)
	}
	out, err := exec.Command(e2etest.ConchBin, "serve", "--home", e2etest.NewHome(t, ""), "--listen", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "without TLS") {
		t.Errorf("non-loopback listen without TLS: %v %s", err, out)
	}
}

func TestServeAgentsAreScoped(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	code, m := g.Do("POST", "/v1/agents", g.Operator, map[string]any{"name": "bob"}, nil)
	bob, _ := m["token"].(string)
	if code != 200 || !strings.HasPrefix(bob, "cat_") || len(bob) != 47 {
		t.Fatalf("add agent: %d %v", code, m)
	}
	_, m = g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "sleep 914.1", "background": true}, nil)
	id := m["details"].(map[string]any)["sessionId"].(string)
	if code, m := g.Do("POST", "/v1/sessions/"+id+"/kill", bob, map[string]any{}, nil); code != 404 || !strings.Contains(m["text"].(string), "No session found for "+id) {
		t.Fatalf("bob killed main's session: %d %v", code, m)
	}
	if code, _ := g.Do("POST", "/v1/sessions/"+id+"/kill", g.Operator, map[string]any{}, map[string]string{"X-Conch-Agent": "main"}); code != 200 {
		t.Fatalf("operator kill for main: %d", code)
	}
	g.Do("DELETE", "/v1/agents/bob", g.Operator, nil, nil)
	if code, _ := g.Do("GET", "/v1/sessions", bob, nil, nil); code != 401 {
		t.Fatalf("removed agent's token still works: %d", code)
	}
}

func TestServeEvents(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	// The run starts once the stream is subscribed: its events cannot
	// come before the subscription, however slow the machine.
	opened := func() {
		if code, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo evt; exit 4", "background": true}, nil); code != 200 {
			t.Fatalf("exec: %d %v", code, m)
		}
	}
	got := e2etest.ReadSSEOpen(t, g.Base+"/v1/events", g.Token, nil, opened, func(e e2etest.SSEEvent) bool { return e.Event == "exec.notice" }, 20*time.Second)
	var kinds []string
	for _, e := range got {
		kinds = append(kinds, e.Event)
	}
	joined := strings.Join(kinds, ",")
	if !strings.Contains(joined, "session.started") || !strings.Contains(joined, "session.ended") || !strings.Contains(got[len(got)-1].Data, `"kind":"failed"`) {
		t.Fatalf("events: %v", got)
	}
	// Resume after the first event: the rest is replayed from the ring.
	again := e2etest.ReadSSE(t, g.Base+"/v1/events", g.Token, map[string]string{"Last-Event-ID": got[0].ID}, func(e e2etest.SSEEvent) bool { return e.Event == "exec.notice" }, 10*time.Second)
	if len(again) != len(got)-1 || again[0].ID == got[0].ID {
		t.Fatalf("resume: %v vs %v", again, got)
	}
	// The session's output stream ends with its end state.
	_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "for i in 1 2 3; do echo s$i; sleep 0.1; done", "background": true}, nil)
	id := m["details"].(map[string]any)["sessionId"].(string)
	out := e2etest.ReadSSE(t, g.Base+"/v1/sessions/"+id+"/stream", g.Token, nil, func(e e2etest.SSEEvent) bool { return e.Event == "end" }, 10*time.Second)
	var text strings.Builder
	for _, e := range out {
		if e.Event == "output" {
			var d map[string]any
			json.Unmarshal([]byte(e.Data), &d)
			text.WriteString(d["text"].(string) + "\n")
		}
	}
	if !strings.Contains(text.String(), "s1") || !strings.Contains(text.String(), "s3") {
		t.Fatalf("stream: %q", text.String())
	}
}

func TestServeShutdownKeepsSessions(t *testing.T) {
	home := e2etest.NewHome(t, "")
	g := e2etest.StartGateway(t, home)
	_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "sleep 1; echo survived", "background": true}, nil)
	id := m["details"].(map[string]any)["sessionId"].(string)
	g.Stop()
	g2 := e2etest.StartGateway(t, home)
	g2.Token = g.Token
	// A poll returns the output that is new since the last one: "survived"
	// may come in a poll of its own, just before the exit.
	var polls []string
	deadline := time.Now().Add(e2etest.Slow(10 * time.Second))
	for {
		_, m = g2.Do("POST", "/v1/sessions/"+id+"/poll", g.Token, map[string]any{"timeout": 500}, nil)
		polls = append(polls, m["text"].(string))
		if m["details"].(map[string]any)["status"] != "running" || time.Now().After(deadline) {
			break
		}
	}
	last := polls[len(polls)-1]
	if !strings.HasSuffix(last, "Process exited with code 0.") || !strings.Contains(strings.Join(polls, "\n"), "survived\n") {
		t.Fatalf("after restart: %q", polls)
	}
	_, m = g2.Do("GET", "/v1/sessions/"+id+"/log", g.Token, nil, nil)
	if text, _ := m["text"].(string); text != "survived" {
		t.Fatalf("log after restart: %v", m)
	}
}

func TestServeApprovalDecisionAPI(t *testing.T) {
	home := e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","ask":"always"}}}`)
	g := e2etest.StartGateway(t, home)
	_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo approved-over-http"}, nil)
	d := m["details"].(map[string]any)
	if d["status"] != "approval-pending" {
		t.Fatalf("exec: %v", m)
	}
	code, m := g.Do("GET", "/v1/approvals", g.Operator, nil, nil)
	if code != 200 || len(m["approvals"].([]any)) != 1 {
		t.Fatalf("approvals: %d %v", code, m)
	}
	if code, _ := g.Do("POST", "/v1/approvals/"+d["approvalSlug"].(string)+"/decision", g.Token, map[string]any{"decision": "allow"}, nil); code != 403 {
		t.Fatalf("agent decided its own approval: %d", code)
	}
	if code, m := g.Do("POST", "/v1/approvals/"+d["approvalSlug"].(string)+"/decision", g.Operator, map[string]any{"decision": "once"}, nil); code != 200 || m["decision"] != "allow-once" {
		t.Fatalf("decision: %d %v", code, m)
	}
	id := d["sessionId"].(string)
	deadline := time.Now().Add(e2etest.Slow(10 * time.Second))
	for {
		_, m = g.Do("GET", "/v1/sessions/"+id+"/log", g.Token, nil, nil)
		if m["text"] == "approved-over-http" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m["text"] != "approved-over-http" {
		t.Fatalf("approved run log: %v", m)
	}
}

func TestMCPStdioProxiesToServe(t *testing.T) {
	home := e2etest.NewHome(t, "")
	g := e2etest.StartGateway(t, home)
	work := t.TempDir()
	c := e2etest.StartConch(t, home, "--workdir", work)
	r := c.Exec(map[string]any{"command": "pwd; sleep 916.1", "yieldMs": 300})
	if r.Str("status") != "running" {
		t.Fatalf("proxied exec: %q %v", r.Text, r.D)
	}
	id := r.Str("sessionId")
	// pwd may print after the 300 ms yield on a loaded machine: the
	// session's log has it either way.
	e2etest.Eventually(t, 10*time.Second, func() string {
		if l := c.Process(map[string]any{"action": "log", "sessionId": id}); !strings.Contains(l.Text, work) {
			return fmt.Sprintf("--workdir not honoured through the proxy: %q, log %q", r.Text, l.Text)
		}
		return ""
	})
	// The gateway owns the session: its API sees it.
	if code, m := g.Do("GET", "/v1/sessions/"+id, g.Token, nil, nil); code != 200 || m["state"] != "running" {
		t.Fatalf("gateway view: %d %v", code, m)
	}
	if k := c.Process(map[string]any{"action": "kill", "sessionId": id}); k.Text != "Killed session "+id+"." {
		t.Fatalf("kill through the proxy: %q", k.Text)
	}
	if r := c.Exec(map[string]any{"command": "true", "cwd": "/"}); !r.IsError || r.Text != `Unknown parameter "cwd".` {
		t.Fatalf("errors through the proxy: %q %v", r.Text, r.D)
	}
}

func TestServeMetrics(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "true"}, nil)
	req, _ := http.NewRequest("GET", g.Base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+g.Operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`conch_exec_total{agent="main",host="gateway",status="completed"} 1`,
		`conch_exec_duration_seconds_count 1`,
		`conch_approvals_pending 0`,
		"# TYPE conch_exec_total counter",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}

func TestCLIWhileMCPHoldsTheHome(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "sleep 917.1", "background": true})
	id := r.Str("sessionId")
	out, err := exec.Command(e2etest.ConchBin, "ps", "--home", home).CombinedOutput()
	if err != nil || !strings.Contains(string(out), id) {
		t.Fatalf("conch ps through the engine socket of conch mcp: %v %s", err, out)
	}
	if out, err := exec.Command(e2etest.ConchBin, "kill", id, "--home", home).CombinedOutput(); err != nil {
		t.Fatalf("conch kill: %v %s", err, out)
	}
	if p := c.Process(map[string]any{"action": "poll", "sessionId": id}); p.Str("state") != "killed" {
		t.Fatalf("after CLI kill: %q", p.Text)
	}
}

func TestServeConfigReload(t *testing.T) {
	home := e2etest.NewHome(t, "")
	g := e2etest.StartGateway(t, home)
	if _, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "sleep 5", "yieldMs": 200}, nil); m["details"].(map[string]any)["status"] != "running" {
		t.Fatalf("before: %v", m)
	}
	os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"tools":{"exec":{"host":"sandbox"}}}`), 0o600)
	g.Cmd.Process.Signal(syscall.SIGHUP)
	e2etest.Eventually(t, 5*time.Second, func() string {
		if _, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "true"}, nil); m["error"] == nil {
			return "not reloaded yet"
		}
		return ""
	})
	os.WriteFile(filepath.Join(home, "config.json"), []byte(`{not json`), 0o600)
	if code, _ := g.Do("POST", "/v1/config/reload", g.Operator, map[string]any{}, nil); code != 400 {
		t.Fatalf("invalid config reload: %d", code)
	}
	if _, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "true"}, nil); m["error"].(map[string]any)["code"] != "sandbox_unavailable" {
		t.Fatalf("the old configuration must stay: %v", m)
	}
}

func TestServeMCPSessionBoundToAgent(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	_, m := g.Do("POST", "/v1/agents", g.Operator, map[string]any{"name": "bob"}, nil)
	bob := m["token"].(string)
	post := func(token, session string, body string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", g.Base+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := post(g.Token, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	resp, body = post(bob, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"process","arguments":{"action":"list"}}}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("bob used main's MCP session: %d %s", resp.StatusCode, body)
	}
}

func TestServeOperatorKillIsOperator(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "sleep 921.1", "background": true}, nil)
	id := m["details"].(map[string]any)["sessionId"].(string)
	if code, m := g.Do("POST", "/v1/sessions/"+id+"/kill", g.Operator, map[string]any{}, map[string]string{"X-Conch-Agent": "main"}); code != 200 || m["details"].(map[string]any)["killedBy"] != "operator" {
		t.Fatalf("operator kill: %d %v", code, m)
	}
	e2etest.Eventually(t, 5*time.Second, func() string {
		_, m = g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "true"}, nil)
		if text := m["text"].(string); !strings.Contains(text, "[conch event] Exec failed ("+id+", killed by operator)") {
			return "the agent was not told: " + text
		}
		return ""
	})
}

func TestServeMaxRunningUnderConcurrency(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, `{"quotas":{"maxRunning":2}}`))
	var wg sync.WaitGroup
	var mu sync.Mutex
	running := 0
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "sleep 922.1", "background": true}, nil)
			if d, ok := m["details"].(map[string]any); ok && d["status"] == "running" {
				mu.Lock()
				running++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if running != 2 {
		t.Fatalf("%d running, want 2", running)
	}
	// A session is running once its shell is; the shell starts sleep a
	// moment later.
	e2etest.Eventually(t, 5*time.Second, func() string {
		if n := len(e2etest.PgrepHome("^sleep 922.1", g.Home)); n != 2 {
			return fmt.Sprintf("%d processes, want 2", n)
		}
		return ""
	})
	_, m := g.Do("GET", "/v1/sessions", g.Token, nil, nil)
	for _, s := range m["details"].(map[string]any)["sessions"].([]any) {
		g.Do("POST", "/v1/sessions/"+s.(map[string]any)["sessionId"].(string)+"/kill", g.Token, map[string]any{}, nil)
	}
}

func TestServeApproveWithdrawRace(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","ask":"always"}}}`))
	for i := 0; i < 8; i++ {
		_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "sleep 923.1"}, nil)
		d := m["details"].(map[string]any)
		done := make(chan struct{})
		go func() {
			g.Do("POST", "/v1/approvals/"+d["approvalSlug"].(string)+"/decision", g.Operator, map[string]any{"decision": "once"}, nil)
			close(done)
		}()
		time.Sleep(time.Duration(i*15) * time.Millisecond)
		g.Do("DELETE", "/v1/sessions/"+d["sessionId"].(string), g.Token, nil, nil)
		<-done
	}
	// Whatever won each race, nothing may be left running unseen.
	e2etest.Eventually(t, 15*time.Second, func() string {
		if p := e2etest.Pgrep("sleep 923.1"); len(p) != 0 {
			_, all := g.Do("GET", "/v1/sessions?all=true", g.Operator, nil, nil)
			out, _ := exec.Command("sh", "-c", "ps -eo pid,ppid,args | grep -v grep | grep -e 'sleep 923.1' -e supervise").Output()
			return fmt.Sprintf("%d runs left after their sessions were removed\n%v\n%s", len(p), all["text"], out)
		}
		return ""
	})
}

// TestServeOperatorCLIRemote drives the operator commands against a gateway
// from a home that holds nothing but the gateway's operator token: pending
// lists, approve decides, the ledger and policy explain come over /v1.
func TestServeOperatorCLIRemote(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","ask":"always"}}}`))
	other := t.TempDir()
	env := []string{"CONCH_GATEWAY=" + g.Base, "CONCH_TOKEN=" + g.Operator}
	_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo remote-approved", "yieldMs": 30000}, nil)
	d := m["details"].(map[string]any)
	if d["status"] != "approval-pending" {
		t.Fatalf("exec: %v", m)
	}
	slug := d["approvalSlug"].(string)
	out, errOut, code := e2etest.RunCLI(t, env, "approvals", "pending", "--home", other)
	if code != 0 || !strings.Contains(out, slug) || !strings.Contains(out, "echo remote-approved") {
		t.Fatalf("pending: %d %q %q", code, out, errOut)
	}
	if _, errOut, code := e2etest.RunCLI(t, []string{"CONCH_GATEWAY=" + g.Base, "CONCH_TOKEN=" + g.Token}, "approvals", "pending", "--home", other); code != e2etest.ExitForbidden {
		t.Fatalf("an agent token listed approvals: %d %q", code, errOut)
	}
	out, errOut, code = e2etest.RunCLI(t, env, "approvals", "approve", slug, "--home", other)
	if code != 0 || !strings.Contains(out, "allow-once") {
		t.Fatalf("approve: %d %q %q", code, out, errOut)
	}
	if _, _, code := e2etest.RunCLI(t, env, "approvals", "deny", slug, "--home", other); code != e2etest.ExitConflict {
		t.Fatalf("second decision: exit %d, want %d", code, e2etest.ExitConflict)
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		_, m := g.Do("POST", "/v1/process", g.Token, map[string]any{"action": "poll", "sessionId": d["sessionId"]}, nil)
		if text, _ := m["text"].(string); !strings.Contains(text, "remote-approved") {
			return "no output yet: " + text
		}
		return ""
	})
	out, errOut, code = e2etest.RunCLI(t, env, "ledger", "tail", "--home", other, "--approval", d["approvalId"].(string))
	if code != 0 || !strings.Contains(out, "allow-once") {
		t.Fatalf("ledger tail: %d %q %q", code, out, errOut)
	}
	if out, errOut, code := e2etest.RunCLI(t, env, "ledger", "verify", "--home", other); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("ledger verify: %d %q %q", code, out, errOut)
	}
	out, errOut, code = e2etest.RunCLI(t, env, "policy", "explain", "--home", other, "--", "rm -rf /tmp/x")
	if code != 0 || !strings.Contains(out, "rm") {
		t.Fatalf("policy explain: %d %q %q", code, out, errOut)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Fatalf("the remote commands wrote to the local home: %v", entries)
	}
}

// TestLedgerTailFollow: `conch ledger tail -f` prints records appended
// after it started, from the home's files and through --gateway, and
// stops cleanly on SIGTERM.
func TestLedgerTailFollow(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	// follow starts a follower and returns once it says it follows: every
	// record appended from then on must be printed.
	follow := func(args ...string) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(e2etest.ConchBin, append([]string{"ledger", "tail", "-f", "--json", "-n", "0"}, args...)...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		errOut, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		ready := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(errOut)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "following after seq") {
					ready <- ""
				}
			}
			ready <- "stderr closed before the follower said it follows"
		}()
		select {
		case msg := <-ready:
			if msg != "" {
				t.Fatal(msg)
			}
		case <-time.After(e2etest.Slow(20 * time.Second)):
			t.Fatal("the follower never said it follows")
		}
		return cmd, bufio.NewScanner(out)
	}
	local, localOut := follow("--home", g.Home)
	remote, remoteOut := follow("--home", t.TempDir(), "--gateway", g.Base, "--token", g.Operator)
	// Both follow: one run appended now is printed by both.
	g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo ledger-follow-1"}, nil)
	for name, sc := range map[string]*bufio.Scanner{"local": localOut, "remote": remoteOut} {
		got := make(chan struct{})
		go func() {
			for sc.Scan() {
				var r map[string]any
				if json.Unmarshal(sc.Bytes(), &r) == nil && r["type"] == "exec" && strings.Contains(sc.Text(), "ledger-follow-1") {
					close(got)
					break
				}
			}
			for sc.Scan() {
			}
		}()
		select {
		case <-got:
		case <-time.After(e2etest.Slow(20 * time.Second)):
			t.Fatalf("%s follower: no exec record for the run appended after it followed", name)
		}
	}
	for _, cmd := range []*exec.Cmd{local, remote} {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("ledger tail -f on SIGTERM: %v", err)
		}
	}
}
