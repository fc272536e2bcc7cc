package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/conchsh/conch/apitype"
)

// TestNodePlanBinding drives a real `conch node` from a test peer that
// speaks the gateway side of the protocol, to send what a real gateway
// never sends: replayed plans, plans that do not match the run, and
// unapproved runs of plans that need approval (hosts.md §5.4).
func TestNodePlanBinding(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conns := make(chan *websocket.Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer cnj_test" && r.Header.Get("Authorization") != "Bearer cnt_test" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.SetReadLimit(8 << 20)
		b, _ := json.Marshal(map[string]string{"nonce": "abc"})
		f, _ := json.Marshal(apitype.Frame{Type: "event", Event: "connect.challenge", Payload: b})
		c.Write(ctx, websocket.MessageText, f)
		_, hb, err := c.Read(ctx)
		if err != nil {
			return
		}
		var hello apitype.Frame
		json.Unmarshal(hb, &hello)
		b, _ = json.Marshal(apitype.NodeHelloReply{Status: "paired"})
		f, _ = json.Marshal(apitype.Frame{Type: "res", ID: hello.ID, OK: true, Payload: b})
		c.Write(ctx, websocket.MessageText, f)
		b, _ = json.Marshal(map[string]string{"nodeToken": "cnt_test"})
		f, _ = json.Marshal(apitype.Frame{Type: "event", Event: "node.paired", Payload: b})
		c.Write(ctx, websocket.MessageText, f)
		conns <- c
		<-ctx.Done()
	}))
	defer srv.Close()
	home := newHome(t, `{"tools":{"exec":{"security":"allowlist","ask":"on-miss"}}}`)
	startNode(t, home, nil, "--gateway", srv.URL, "--token", "cnj_test")
	var c *websocket.Conn
	select {
	case c = <-conns:
	case <-ctx.Done():
		t.Fatal("node did not connect")
	}
	n := 0
	call := func(method string, params any) apitype.Frame {
		t.Helper()
		n++
		id := fmt.Sprintf("t%d", n)
		b, _ := json.Marshal(params)
		f, _ := json.Marshal(apitype.Frame{Type: "req", ID: id, Method: method, Params: b})
		if err := c.Write(ctx, websocket.MessageText, f); err != nil {
			t.Fatal(err)
		}
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var r apitype.Frame
			json.Unmarshal(b, &r)
			if r.Type == "res" && r.ID == id {
				return r
			}
		}
	}
	empty := sha256.Sum256(nil)
	envHash := hex.EncodeToString(empty[:])
	wd := t.TempDir()
	script := filepath.Join(wd, "job.sh")
	os.WriteFile(script, []byte("echo job\n"), 0o644)
	prepare := func(cmd string) apitype.NodePrepareReply {
		t.Helper()
		r := call("system.run.prepare", apitype.NodePrepareParams{Command: []string{"/bin/sh", "-lc", cmd}, RawCommand: cmd, Cwd: wd, AgentID: "main", EnvHash: envHash})
		if !r.OK {
			t.Fatalf("prepare %q: %v", cmd, r.Error)
		}
		var p apitype.NodePrepareReply
		json.Unmarshal(r.Payload, &p)
		return p
	}
	run := func(p apitype.NodePrepareReply, sid string, approved bool, mutate func(*apitype.NodeRunParams)) apitype.Frame {
		rp := apitype.NodeRunParams{PlanID: p.PlanID, Command: p.Plan.Argv, RawCommand: p.Plan.RawCommand, Cwd: p.Plan.Cwd,
			AgentID: "main", RunID: "r-" + sid, SessionID: sid, Approved: approved, Stream: true, Stdin: "closed"}
		if mutate != nil {
			mutate(&rp)
		}
		return call("system.run", rp)
	}
	wantErr := func(f apitype.Frame, text string) {
		t.Helper()
		if f.OK || f.Error == nil || f.Error.Message != text {
			t.Fatalf("want error %q, got %+v", text, f)
		}
	}

	// rawCommand must match the argv.
	r := call("system.run.prepare", apitype.NodePrepareParams{Command: []string{"/bin/sh", "-lc", "echo a"}, RawCommand: "echo b", AgentID: "main", EnvHash: envHash})
	wantErr(r, "INVALID_REQUEST: rawCommand does not match command")
	r = call("system.run.prepare", apitype.NodePrepareParams{Command: []string{"/bin/sh", "-lc", "true"}, RawCommand: "true", Cwd: filepath.Join(wd, "missing"), AgentID: "main", EnvHash: envHash})
	wantErr(r, "SYSTEM_RUN_DENIED: approval requires an existing canonical cwd")

	// A miss needs approval: unapproved runs are refused, and the plan is
	// single-use even after a refusal.
	p := prepare("sh job.sh")
	if !p.Verdict.RequiresApproval || p.Plan.Script == nil || len(p.Plan.Exes) == 0 || p.PlanHash == "" {
		t.Fatalf("plan: %+v", p)
	}
	wantErr(run(p, "pb-one", false, nil), "SYSTEM_RUN_DENIED: approval required")
	wantErr(run(p, "pb-two", true, nil), "SYSTEM_RUN_DENIED: execution plan mismatch")

	// Approved runs must match the plan exactly.
	p = prepare("sh job.sh")
	wantErr(run(p, "pb-three", true, func(r *apitype.NodeRunParams) { r.RawCommand = "sh other.sh"; r.Command[2] = "sh other.sh" }), "SYSTEM_RUN_DENIED: execution plan mismatch")
	p = prepare("sh job.sh")
	wantErr(run(p, "pb-four", true, func(r *apitype.NodeRunParams) { r.Env = map[string]string{"X": "1"} }), "SYSTEM_RUN_DENIED: execution plan mismatch")
	// The script changed between approval and run.
	p = prepare("sh job.sh")
	os.WriteFile(script, []byte("echo changed\n"), 0o644)
	wantErr(run(p, "pb-five", true, nil), "SYSTEM_RUN_DENIED: approval script operand changed before execution")
	// The cwd was replaced.
	p = prepare("sh job.sh")
	os.Rename(wd, wd+".old")
	os.Mkdir(wd, 0o700)
	os.WriteFile(script, []byte("echo changed\n"), 0o644)
	wantErr(run(p, "pb-six", true, nil), "SYSTEM_RUN_DENIED: approval cwd changed before execution")

	// A matching approved run starts once; a replay of its plan is refused.
	p = prepare("sh job.sh")
	if r := run(p, "pb-seven", true, nil); !r.OK {
		t.Fatalf("approved run: %+v", r.Error)
	}
	wantErr(run(p, "pb-eight", true, nil), "SYSTEM_RUN_DENIED: execution plan mismatch")
	// A session id already used on the node is refused.
	p = prepare("sh job.sh")
	wantErr(run(p, "pb-seven", true, nil), "INVALID_REQUEST: session id in use")
	if !strings.HasPrefix(p.Plan.Cwd, "/") {
		t.Fatalf("cwd not canonical: %s", p.Plan.Cwd)
	}
}
