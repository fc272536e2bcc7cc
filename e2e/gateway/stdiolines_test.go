package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// rawMCP is conch mcp driven line by line, for what an MCP client library
// would never send.
type rawMCP struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan map[string]any
	seen  []map[string]any // read while waiting for another id
}

func startRawMCP(t *testing.T, home string) *rawMCP {
	t.Helper()
	cmd := exec.Command(e2etest.ConchBin, "mcp", "--home", home)
	cmd.Dir = t.TempDir()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	_, stderrFile := e2etest.NewLog(t, "conch mcp")
	cmd.Stderr = stderrFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &rawMCP{t: t, cmd: cmd, stdin: stdin, lines: make(chan map[string]any, 100)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				r.lines <- m
			}
		}
		close(r.lines)
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
		}
	})
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	r.answer(float64(0))
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *rawMCP) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
		r.t.Fatalf("write to conch mcp: %v", err)
	}
}

// answer waits for the message with id (others are kept in order).
func (r *rawMCP) answer(id any) map[string]any {
	r.t.Helper()
	for i, m := range r.seen {
		if m["id"] == id {
			r.seen = append(r.seen[:i], r.seen[i+1:]...)
			return m
		}
	}
	deadline := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("conch mcp closed stdout before answering %v", id)
			}
			if m["id"] == id {
				return m
			}
			r.seen = append(r.seen, m)
		case <-deadline:
			r.t.Fatalf("no answer to %v within 60 s", id)
		}
	}
}

// TestStdioBadLinesKeepCalls: lines that are not JSON, not JSON-RPC, or too
// large, written to conch mcp while an exec call is in its yield window,
// are each answered with a JSON-RPC error; conch mcp goes on (the SDK
// alone would end the session, which cancels the call and kills its
// command as if the agent had given up), the call in flight is answered
// on SIGTERM with its running session, and the ledger records no kill.
func TestStdioBadLinesKeepCalls(t *testing.T) {
	home := e2etest.NewHome(t, "")
	const mark = "926.1"
	r := startRawMCP(t, home)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep ` + mark + `","yieldMs":120000}}}`)
	waitCommands(t, "^sleep "+mark, home, 1)
	bad := []string{
		"not json",
		`{"jsonrpc":"2.0","id":2,"method":"tools/call"`,
		`[]`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"process","arguments":{"action":"write","data":"` + strings.Repeat("y", 40<<20) + `"}}}`,
	}
	for i, line := range bad {
		r.send(line)
		id := fmt.Sprint(100 + i)
		r.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"ping"}`)
		if m := r.answer(id); m["result"] == nil {
			t.Fatalf("ping after bad line %d: %v", i, m)
		}
	}
	if m := r.answer(float64(3)); m["error"] == nil {
		t.Errorf("the oversized call: %v", m)
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	m := r.answer(float64(1))
	res, _ := m["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if sc["status"] != "running" || sc["sessionId"] == nil {
		t.Fatalf("the call in flight at SIGTERM: %v", m)
	}
	waitExit(t, r.cmd.Process.Pid, 30*time.Second)
	for _, rec := range ledgerOf(t, home) {
		if rec["type"] == "end" {
			t.Errorf("ledger records an end: %v", rec)
		}
	}
	if p := e2etest.PgrepHome("^sleep "+mark, home); len(p) != 1 {
		t.Errorf("commands running after the stop: %v, want the one", p)
	}
}
