package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stop rule (docs/operations.md "What happens when"): on SIGTERM or
// SIGINT every call in flight gets an answer before the transport closes,
// and every command either keeps running as a listed session or is killed
// with killedBy "shutdown"; the ledger and the next engine's process list
// say the same, and nothing runs twice. These tests hold that through
// both transports, with sessions.survive on and off.

// stopCalls is the number of foreground calls in flight at the signal.
const stopCalls = 5

// outcome is what one call in flight got.
type outcome struct {
	r   e2etest.Result
	err error
}

// callsInFlight starts n foreground exec calls of cmd through c, with a
// yield window far longer than the test, and returns their outcomes'
// channel. The calls stay in their yield window until conch stops.
func callsInFlight(c *e2etest.Conch, n int, cmd string) chan outcome {
	out := make(chan outcome, n)
	for i := 0; i < n; i++ {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			res, err := c.CS.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": cmd, "yieldMs": 120000}})
			var r e2etest.Result
			if err == nil {
				r.IsError = res.IsError
				if len(res.Content) > 0 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok {
						r.Text = tc.Text
					}
				}
				b, _ := json.Marshal(res.StructuredContent)
				json.Unmarshal(b, &r.D)
			}
			out <- outcome{r, err}
		}()
	}
	return out
}

// waitCommands waits until n processes matching pattern run in home's
// sessions: every call's command has started.
func waitCommands(t *testing.T, pattern, home string, n int) {
	t.Helper()
	e2etest.Eventually(t, 60*time.Second, func() string {
		if p := e2etest.PgrepHome(pattern, home); len(p) != n {
			return fmt.Sprintf("%d of %d commands running: %v", len(p), n, p)
		}
		return ""
	})
}

// answered collects n outcomes and checks that each is a running result
// with a session id, or the stopping error; it returns the session ids.
func answered(t *testing.T, out chan outcome, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		var o outcome
		select {
		case o = <-out:
		case <-time.After(60 * time.Second):
			t.Fatalf("call %d of %d not answered within 60 s of the stop signal", i+1, n)
		}
		switch {
		case o.err != nil:
			t.Errorf("call got no answer: %v", o.err)
		case o.r.Str("status") == "running" && o.r.Str("sessionId") != "":
			ids = append(ids, o.r.Str("sessionId"))
		case o.r.IsError && strings.Contains(o.r.Text, "shutting down"):
		default:
			t.Errorf("call answered neither running nor stopping: %q %v", o.r.Text, o.r.D)
		}
	}
	return ids
}

// waitExit waits for pid to exit.
func waitExit(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	e2etest.Eventually(t, within, func() string {
		if !e2etest.IsZombie(pid) {
			return fmt.Sprintf("pid %d still running after the stop signal", pid)
		}
		return ""
	})
}

// ledgerOf reads every record of home's ledger through the CLI.
func ledgerOf(t *testing.T, home string) []map[string]any {
	t.Helper()
	out, err := exec.Command(e2etest.ConchBin, "ledger", "tail", "--json", "-n", "100000", "--home", home).Output()
	if err != nil {
		t.Fatalf("ledger tail: %v", err)
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil {
			recs = append(recs, r)
		}
	}
	return recs
}

// checkStopped checks what the ledger and the next engine say after the
// stop: each of ids is one run (recorded once), and running and listed
// (survive) or ended killed by shutdown (not survive); no command was
// killed by "agent", and the processes match.
func checkStopped(t *testing.T, home, pattern, mark string, ids []string, survive bool) {
	t.Helper()
	recs := ledgerOf(t, home)
	runs := map[string]int{}
	for _, r := range recs {
		b, _ := json.Marshal(r)
		switch {
		case r["type"] == "exec" && strings.Contains(string(b), mark):
			runs[fmt.Sprint(r["sessionId"])]++
		case r["type"] == "end" && r["killedBy"] == "agent":
			t.Errorf("ledger records a kill by the agent, which killed nothing: %s", b)
		}
	}
	if len(runs) != len(ids) {
		t.Errorf("ledger has %d runs %v for %d answered calls %v", len(runs), runs, len(ids), ids)
	}
	for _, id := range ids {
		if runs[id] != 1 {
			t.Errorf("session %s ran %d times per the ledger", id, runs[id])
		}
	}
	c := e2etest.StartConch(t, home)
	ls := c.Process(map[string]any{"action": "list"})
	for _, id := range ids {
		if !strings.Contains(ls.Text, id+" ") {
			t.Errorf("session %s of an answered call is not listed: %q", id, ls.Text)
			continue
		}
		p := c.Process(map[string]any{"action": "poll", "sessionId": id})
		if survive {
			if p.Str("status") != "running" {
				t.Errorf("session %s: %q %v, want running", id, p.Text, p.D)
			}
			continue
		}
		if p.Str("state") != "killed" || p.Str("killedBy") != "shutdown" {
			t.Errorf("session %s: %q %v, want killed by shutdown", id, p.Text, p.D)
		}
	}
	want := 0
	if survive {
		want = len(ids)
	}
	if p := e2etest.PgrepHome(pattern, home); len(p) != want {
		t.Errorf("%d commands running after the stop, want %d: %v", len(p), want, p)
	}
	if !survive {
		for _, r := range ledgerOf(t, home) {
			if r["type"] == "end" && r["killedBy"] != "shutdown" {
				t.Errorf("end record %v, want killedBy shutdown", r)
			}
		}
	}
}

func TestStopSignalMCPStdio(t *testing.T) {
	for _, survive := range []bool{true, false} {
		t.Run(fmt.Sprintf("survive=%v", survive), func(t *testing.T) {
			home := e2etest.NewHome(t, fmt.Sprintf(`{"sessions":{"survive":%v},"tools":{"exec":{"killGraceMs":500}}}`, survive))
			mark := fmt.Sprintf("921.%d", map[bool]int{true: 1, false: 2}[survive])
			pattern := "^sleep " + mark
			c := e2etest.StartConch(t, home)
			out := callsInFlight(c, stopCalls, "echo started; sleep "+mark)
			waitCommands(t, pattern, home, stopCalls)
			pid := c.Cmd.Process.Pid
			if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			ids := answered(t, out, stopCalls)
			waitExit(t, pid, 30*time.Second)
			c.Close()
			if len(ids) != stopCalls {
				t.Fatalf("%d of %d calls answered running: %v", len(ids), stopCalls, ids)
			}
			checkStopped(t, home, pattern, mark, ids, survive)
		})
	}
}

func TestStopSignalServe(t *testing.T) {
	for _, survive := range []bool{true, false} {
		t.Run(fmt.Sprintf("survive=%v", survive), func(t *testing.T) {
			home := e2etest.NewHome(t, fmt.Sprintf(`{"sessions":{"survive":%v},"tools":{"exec":{"killGraceMs":500}}}`, survive))
			mark := fmt.Sprintf("922.%d", map[bool]int{true: 1, false: 2}[survive])
			pattern := "^sleep " + mark
			g := e2etest.StartGateway(t, home)
			c := g.MCPClient(g.Token)
			// Calls through MCP over HTTP, and one through the /v1 API.
			out := callsInFlight(c, stopCalls-1, "echo started; sleep "+mark)
			go func() {
				// Not g.do: it may not fail the test from this goroutine.
				body := strings.NewReader(`{"command":"echo started; sleep ` + mark + `","yieldMs":120000}`)
				req, _ := http.NewRequest("POST", g.Base+"/v1/exec", body)
				req.Header.Set("Authorization", "Bearer "+g.Token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					out <- outcome{err: err}
					return
				}
				defer resp.Body.Close()
				var m map[string]any
				json.NewDecoder(resp.Body).Decode(&m)
				var r e2etest.Result
				r.D, _ = m["details"].(map[string]any)
				r.Text, _ = m["text"].(string)
				r.IsError = resp.StatusCode != 200
				out <- outcome{r: r}
			}()
			waitCommands(t, pattern, home, stopCalls)
			sent := time.Now()
			if err := g.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			ids := answered(t, out, stopCalls)
			t.Logf("answered %v after SIGTERM", time.Since(sent))
			done := make(chan error, 1)
			go func() { done <- g.Cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("conch serve on SIGTERM: %v", err)
				}
				t.Logf("exited %v after SIGTERM", time.Since(sent))
			case <-time.After(60 * time.Second):
				t.Fatal("conch serve did not exit within 60 s of SIGTERM")
			}
			c.Close()
			if len(ids) != stopCalls {
				t.Fatalf("%d of %d calls answered running: %v", len(ids), stopCalls, ids)
			}
			checkStopped(t, home, pattern, mark, ids, survive)
		})
	}
}

// TestKill9ServeWithCallInFlight: a conch serve killed outright answers
// nothing, but its command keeps running once, and the next engine lists
// it (the "kill -9" row of docs/operations.md).
func TestKill9ServeWithCallInFlight(t *testing.T) {
	home := e2etest.NewHome(t, "")
	const mark = "923.1"
	pattern := "^sleep " + mark
	g := e2etest.StartGateway(t, home)
	c := g.MCPClient(g.Token)
	out := callsInFlight(c, 1, "echo started; sleep "+mark)
	waitCommands(t, pattern, home, 1)
	g.Cmd.Process.Kill()
	g.Cmd.Wait()
	select {
	case o := <-out:
		if o.err == nil {
			t.Fatalf("a killed gateway answered: %q", o.r.Text)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not end when the gateway died")
	}
	c.Close()
	// A shared supervisor writes meta.json once it sees its engine go.
	var ids []string
	e2etest.Eventually(t, 20*time.Second, func() string {
		ids = nil
		entries, _ := os.ReadDir(filepath.Join(home, "sessions"))
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(home, "sessions", e.Name(), "meta.json")); err == nil {
				ids = append(ids, e.Name())
			}
		}
		if len(ids) != 1 {
			return fmt.Sprintf("sessions after kill -9: %v", ids)
		}
		return ""
	})
	checkStopped(t, home, pattern, mark, ids, true)
}

// TestStopSignalMCPProxy: a conch mcp that proxies to conch serve answers
// its calls in flight on SIGTERM too, at once: it asks the gateway to
// answer them now (their yield windows are far longer than the test
// waits), and their commands keep running there, not killed as if the
// agent had given up.
func TestStopSignalMCPProxy(t *testing.T) {
	home := e2etest.NewHome(t, "")
	const mark = "924.1"
	pattern := "^sleep " + mark
	g := e2etest.StartGateway(t, home)
	c := e2etest.StartConch(t, home)
	out := make(chan outcome, 2)
	for i := 0; i < 2; i++ {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			res, err := c.CS.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "sleep " + mark, "yieldMs": 120000}})
			var r e2etest.Result
			if err == nil {
				b, _ := json.Marshal(res.StructuredContent)
				json.Unmarshal(b, &r.D)
				r.IsError = res.IsError
			}
			out <- outcome{r, err}
		}()
	}
	waitCommands(t, pattern, home, 2)
	pid := c.Cmd.Process.Pid
	sent := time.Now()
	c.Cmd.Process.Signal(syscall.SIGTERM)
	ids := answered(t, out, 2)
	t.Logf("answered %v after SIGTERM", time.Since(sent))
	waitExit(t, pid, 30*time.Second)
	if len(ids) != 2 {
		t.Fatalf("answered running: %v", ids)
	}
	for _, id := range ids {
		if code, m := g.Do("GET", "/v1/sessions/"+id, g.Token, nil, nil); code != 200 || m["state"] != "running" {
			t.Errorf("session %s on the gateway: %d %v", id, code, m)
		}
	}
	if p := e2etest.PgrepHome(pattern, home); len(p) != 2 {
		t.Errorf("commands running after the proxy stopped: %v", p)
	}
}

// TestSIGHUPMCPProxy: SIGHUP does not end a proxying conch mcp (its
// default action would, cutting its calls, which the gateway then treats
// as cancelled by the agent and kills): the proxy logs that it does not
// reload, its call in flight stays open and keeps its command, new calls
// work, and a later SIGTERM answers the call with its running session.
func TestSIGHUPMCPProxy(t *testing.T) {
	home := e2etest.NewHome(t, "")
	const mark = "925.1"
	pattern := "^sleep " + mark
	g := e2etest.StartGateway(t, home)
	c := e2etest.StartConch(t, home)
	out := callsInFlight(c, 1, "sleep "+mark)
	waitCommands(t, pattern, home, 1)
	pid := c.Cmd.Process.Pid
	if err := c.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if r := c.Exec(map[string]any{"command": "echo after-hup"}); !strings.Contains(r.Text, "after-hup") {
		t.Fatalf("a call after SIGHUP: %q", r.Text)
	}
	select {
	case o := <-out:
		t.Fatalf("the call in flight ended at SIGHUP: %v %q", o.err, o.r.Text)
	default:
	}
	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ids := answered(t, out, 1)
	waitExit(t, pid, 30*time.Second)
	if len(ids) != 1 {
		t.Fatalf("answered running: %v", ids)
	}
	if code, m := g.Do("GET", "/v1/sessions/"+ids[0], g.Token, nil, nil); code != 200 || m["state"] != "running" {
		t.Errorf("session %s on the gateway: %d %v", ids[0], code, m)
	}
	for _, r := range ledgerOf(t, home) {
		if r["type"] == "end" && r["sessionId"] == ids[0] {
			t.Errorf("ledger records an end of the call's session: %v", r)
		}
	}
}

// holdsLock reports whether pid has the home's engine lock open: its
// engine is starting (signals are caught before it is taken).
func holdsLock(pid int, home string) bool {
	want := filepath.Join(home, "run", "engine.lock")
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}

// TestSIGHUPDuringStartup: a SIGHUP (a service manager's reload) that
// arrives while conch serve or conch mcp is still starting does not end it:
// once started it serves as usual.
func TestSIGHUPDuringStartup(t *testing.T) {
	t.Run("serve", func(t *testing.T) {
		home := e2etest.NewHome(t, "")
		cmd := exec.Command(e2etest.ConchBin, "serve", "--home", home, "--listen", "127.0.0.1:0", "--log-level", "warn")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		_, stderrFile := e2etest.NewLog(t, "conch serve")
		cmd.Stderr = stderrFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		base := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if m := e2etest.ListenRE.FindStringSubmatch(sc.Text()); m != nil {
					base <- m[1]
				}
			}
			close(base)
		}()
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
			}
		})
		hupAtStart(t, cmd.Process.Pid, home)
		var b string
		select {
		case b = <-base:
		case <-time.After(60 * time.Second):
		}
		if b == "" {
			t.Fatal("conch serve did not start after a SIGHUP during its start")
		}
		resp, err := http.Get(b + "/v1/health")
		if err != nil {
			t.Fatalf("health after a SIGHUP during the start: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("health after a SIGHUP during the start: %s", resp.Status)
		}
	})
	t.Run("mcp", func(t *testing.T) {
		home := e2etest.NewHome(t, "")
		cmd := exec.Command(e2etest.ConchBin, "mcp", "--home", home)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		_, stderrFile := e2etest.NewLog(t, "conch mcp")
		cmd.Stderr = stderrFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
		hupAtStart(t, cmd.Process.Pid, home)
		fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || !strings.Contains(line, `"id":1`) {
			t.Fatalf("conch mcp after a SIGHUP during its start: %q %v", line, err)
		}
	})
}

// hupAtStart sends SIGHUP to pid as soon as its engine starts (it has
// taken the home's lock, long before it serves).
func hupAtStart(t *testing.T, pid int, home string) {
	t.Helper()
	// A tight loop: the window between the lock and the end of the
	// start is a few milliseconds.
	for deadline := time.Now().Add(20 * time.Second); !holdsLock(pid, home); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the engine has not started")
		}
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
