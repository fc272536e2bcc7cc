package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

func TestToolsList(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	res, err := c.CS.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range res.Tools {
		names[tool.Name] = true
		schema, _ := tool.InputSchema.(map[string]any)
		if schema["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties = %v, want false", tool.Name, schema["additionalProperties"])
		}
	}
	if !names["exec"] || !names["process"] || len(names) != 2 {
		t.Fatalf("tools = %v, want exec and process", names)
	}
}

func TestExecCompleted(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("x"), 0o600)
	r := c.Exec(map[string]any{"command": "ls -la", "workdir": dir})
	if r.IsError || r.Str("status") != "completed" || r.Num("exitCode") != 0 {
		t.Fatalf("ls: %+v", r)
	}
	if !strings.Contains(r.Text, "hello.txt") {
		t.Fatalf("ls output lacks hello.txt: %q", r.Text)
	}
	if r.Str("state") != "exited" || r.Str("cwd") != dir {
		t.Fatalf("details: %v", r.D)
	}
	if _, ok := r.D["aggregated"]; ok {
		t.Error("MCP details carry aggregated; it belongs to the text")
	}
	if r.Str("hostReason") != "implicit-sandbox-off" || r.Str("host") != "gateway" {
		t.Errorf("host = %q reason %q", r.Str("host"), r.Str("hostReason"))
	}
}

func TestExecExitCodes(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "exit 3"})
	if r.Str("status") != "completed" || r.Num("exitCode") != 3 || r.Text != "(no output)\n\n(Command exited with code 3)" {
		t.Fatalf("exit 3: %q %v", r.Text, r.D)
	}
	r = c.Exec(map[string]any{"command": "definitely-not-a-command-xyz"})
	if r.Str("status") != "failed" || r.Num("exitCode") != 127 || !strings.HasSuffix(r.Text, "\n\nCommand not found") || r.IsError {
		t.Fatalf("missing command: %q %v", r.Text, r.D)
	}
	if !strings.Contains(r.Text, "definitely-not-a-command-xyz") {
		t.Errorf("the shell's own message is missing: %q", r.Text)
	}
	os.WriteFile(filepath.Join(t.TempDir(), "x"), nil, 0o600)
	f := filepath.Join(t.TempDir(), "noexec.sh")
	os.WriteFile(f, []byte("echo hi\n"), 0o600)
	r = c.Exec(map[string]any{"command": f})
	if r.Num("exitCode") != 126 || !strings.HasSuffix(r.Text, "Command not executable (permission denied)") {
		t.Fatalf("not executable: %q %v", r.Text, r.D)
	}
	r = c.Exec(map[string]any{"command": "kill -SEGV $$"})
	if r.Str("status") != "failed" || r.Str("state") != "signaled" || r.Str("signal") != "SIGSEGV" || r.D["exitCode"] != nil {
		t.Fatalf("signal: %q %v", r.Text, r.D)
	}
	if _, present := r.D["exitCode"]; !present {
		t.Fatal("exitCode must be an explicit null for a signal death")
	}
	if r.Text != "Command aborted by signal SIGSEGV" {
		t.Fatalf("signal text = %q", r.Text)
	}
}

func TestExecStdoutStderrInterleaved(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "echo one; sleep 0.05; echo two >&2; sleep 0.05; echo three"})
	if r.Text != "one\ntwo\nthree" {
		t.Fatalf("text = %q", r.Text)
	}
}

func TestBackgroundPollLogKill(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "for i in $(seq 1 50); do echo line $i; sleep 0.02; done; sleep 901.1", "yieldMs": 300})
	if r.Str("status") != "running" {
		t.Fatalf("want running: %q %v", r.Text, r.D)
	}
	id := r.Str("sessionId")
	if !strings.HasPrefix(r.Text, "Command still running (session "+id+", pid ") || !strings.Contains(r.Text, "Output so far (last ") {
		t.Fatalf("running text: %q", r.Text)
	}
	// Poll until all 50 lines arrived; together the polls must hold each
	// line exactly once (non-destructive cursor reads, no loss).
	var got []string
	e2etest.Eventually(t, 10*time.Second, func() string {
		p := c.Process(map[string]any{"action": "poll", "sessionId": id})
		if p.Str("status") != "running" {
			return "ended early: " + p.Text
		}
		body := strings.TrimSuffix(p.Text, "\n\nProcess still running.")
		if body != "(no new output)" {
			got = append(got, strings.Split(body, "\n")...)
		}
		if len(got) < 50 {
			return "only " + strings.Join(got, ",")
		}
		return ""
	})
	for i, l := range got {
		if want := "line " + strconv.Itoa(i+1); l != want {
			t.Fatalf("poll line %d = %q, want %q (all: %q)", i, l, want, got)
		}
	}
	l := c.Process(map[string]any{"action": "log", "sessionId": id, "offset": 10, "limit": 2})
	if l.Text != "line 11\nline 12" || l.Num("totalLines") != 50 {
		t.Fatalf("log window: %q %v", l.Text, l.D)
	}
	ls := c.Process(map[string]any{"action": "list"})
	if !strings.Contains(ls.Text, id+" running ") {
		t.Fatalf("list: %q", ls.Text)
	}
	k := c.Process(map[string]any{"action": "kill", "sessionId": id})
	if k.Text != "Killed session "+id+"." || k.Str("state") != "killed" || k.Str("killedBy") != "agent" {
		t.Fatalf("kill: %q %v", k.Text, k.D)
	}
	p := c.Process(map[string]any{"action": "poll", "sessionId": id})
	if !strings.HasSuffix(p.Text, "Process was killed by agent (signal SIGTERM).") || p.Str("status") != "failed" {
		t.Fatalf("poll after kill: %q %v", p.Text, p.D)
	}
	if n := len(e2etest.Pgrep("sleep 901.1")); n != 0 {
		t.Fatalf("%d sleep processes survived the kill", n)
	}
	ls = c.Process(map[string]any{"action": "list"})
	if !strings.Contains(ls.Text, id+" killed ") {
		t.Fatalf("list after kill: %q", ls.Text)
	}
}
