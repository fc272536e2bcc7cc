package process

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

func TestWaitDevServer(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	port := e2etest.FreePort(t)
	r := c.Exec(map[string]any{"command": fmt.Sprintf("sleep 0.3; exec python3 -u -m http.server %d --bind 127.0.0.1", port), "background": true})
	id := r.Str("sessionId")
	w := c.Process(map[string]any{"action": "wait", "sessionId": id, "until": []any{"port", "regex"}, "port": port, "pattern": "never-printed", "timeout": 20000})
	if w.Str("outcome") != "met" || w.Str("fired") != "port" || !strings.Contains(w.Text, fmt.Sprintf("Condition met: port 127.0.0.1:%d after ", port)) {
		t.Fatalf("port: %q %v", w.Text, w.D)
	}
	w = c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "http", "url": fmt.Sprintf("http://127.0.0.1:%d/", port), "timeout": 20000})
	if w.Str("outcome") != "met" || w.Str("fired") != "http" {
		t.Fatalf("http: %q %v", w.Text, w.D)
	}
	c.Process(map[string]any{"action": "kill", "sessionId": id})
}

func TestWaitConditions(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "echo one; sleep 0.3; echo ready-now; sleep 0.3; touch made.txt; sleep 918.1", "background": true})
	id := r.Str("sessionId")
	w := c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "regex", "pattern": "READY", "ignoreCase": true, "timeout": 10000})
	if w.Str("outcome") != "met" || !strings.HasSuffix(w.Text, "\nline 2: ready-now") {
		t.Fatalf("regex: %q %v", w.Text, w.D)
	}
	m := w.D["match"].(map[string]any)
	if m["line"] != 2.0 || m["offset"] != 1.0 || m["cursor"] != 14.0 {
		t.Fatalf("match: %v", m)
	}
	// Waiting for the next occurrence after the match times out.
	w = c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "regex", "pattern": "ready", "since": m["cursor"], "timeout": 300})
	if w.Str("outcome") != "timeout" || w.Text != "Timed out after 300 ms waiting for regex /ready/; process still running." {
		t.Fatalf("timeout: %q", w.Text)
	}
	w = c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "file", "path": "made.txt", "timeout": 10000})
	if w.Str("fired") != "file" {
		t.Fatalf("file: %q", w.Text)
	}
	w = c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "idle", "idleMs": 300, "timeout": 10000})
	if w.Str("fired") != "idle" || !strings.HasPrefix(w.Text, "Condition met: idle 300 ms after ") {
		t.Fatalf("idle: %q", w.Text)
	}
	c.Process(map[string]any{"action": "kill", "sessionId": id})

	r = c.Exec(map[string]any{"command": "echo bye; exit 3", "background": true})
	w = c.Process(map[string]any{"action": "wait", "sessionId": r.Str("sessionId"), "until": "regex", "pattern": "never", "timeout": 10000})
	if w.Str("outcome") != "exited" || w.Text != "bye\n\nProcess exited with code 3 before the condition was met." {
		t.Fatalf("exited: %q %v", w.Text, w.D)
	}
	r = c.Exec(map[string]any{"command": "sleep 0.2; exit 4", "background": true})
	w = c.Process(map[string]any{"action": "wait", "sessionId": r.Str("sessionId")})
	if w.Str("outcome") != "met" || w.Text != "Process exited with code 4." || w.Str("fired") != "exit" {
		t.Fatalf("exit: %q %v", w.Text, w.D)
	}
	// A final line printed just before the exit still counts.
	r = c.Exec(map[string]any{"command": "sleep 0.2; printf 'last words'", "background": true})
	w = c.Process(map[string]any{"action": "wait", "sessionId": r.Str("sessionId"), "until": "regex", "pattern": "last words", "timeout": 10000})
	if w.Str("outcome") != "met" {
		t.Fatalf("final partial line: %q", w.Text)
	}
	if w := c.Process(map[string]any{"action": "wait", "sessionId": r.Str("sessionId"), "until": "regex"}); !w.IsError || w.Text != "pattern is required for until=regex." {
		t.Fatalf("missing pattern: %q", w.Text)
	}
	if w := c.Process(map[string]any{"action": "wait", "sessionId": "nope", "timeout": 60000}); w.Text != "No session found for nope" {
		t.Fatalf("missing session: %q", w.Text)
	}
}

func TestSearch(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "seq 1 100", "background": true})
	id := r.Str("sessionId")
	c.WaitEnd(id, 10*time.Second)
	s := c.Process(map[string]any{"action": "search", "sessionId": id, "pattern": "^5[05]$", "context": 1})
	want := "49-49\n50:50\n51-51\n--\n54-54\n55:55\n56-56\n2 matches in 100 lines (showing 2)."
	if s.Text != want {
		t.Fatalf("search:\n%s\nwant:\n%s", s.Text, want)
	}
	ms := s.D["matches"].([]any)
	if ms[0].(map[string]any)["offset"] != 49.0 {
		t.Fatalf("offset: %v", ms[0])
	}
	s = c.Process(map[string]any{"action": "search", "sessionId": id, "pattern": "^7", "max": 3})
	if !strings.HasSuffix(s.Text, "11 matches in 100 lines (showing 3).") || s.D["truncated"] != true {
		t.Fatalf("max: %q", s.Text)
	}
	if s := c.Process(map[string]any{"action": "search", "sessionId": id, "pattern": "zzz"}); s.Text != "No matches for /zzz/ in session "+id+" (100 lines)." {
		t.Fatalf("none: %q", s.Text)
	}
	if s := c.Process(map[string]any{"action": "search", "sessionId": id, "pattern": "("}); !s.IsError || !strings.HasPrefix(s.Text, "Invalid pattern: ") {
		t.Fatalf("bad pattern: %q", s.Text)
	}
}

func TestPromptDetection(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"tools":{"exec":{"promptIdleMs":300}}}`))
	r := c.Exec(map[string]any{"command": "printf 'Proceed with install? [y/N] '; read a; echo got $a", "background": true})
	id := r.Str("sessionId")
	w := c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "regex", "pattern": "never", "timeout": 10000})
	if w.Str("outcome") != "input" || w.Text != "Proceed with install? [y/N]\n\nProcess is awaiting input (Proceed with install? [y/N]) before the condition was met." {
		t.Fatalf("wait: %q %v", w.Text, w.D)
	}
	p := c.Process(map[string]any{"action": "poll", "sessionId": id})
	if !strings.HasSuffix(p.Text, "\n\nProcess is awaiting input: Proceed with install? [y/N]") {
		t.Fatalf("poll: %q", p.Text)
	}
	if l := c.Process(map[string]any{"action": "list"}); !strings.Contains(l.Text, "[awaiting input]") {
		t.Fatalf("list: %q", l.Text)
	}
	c.Process(map[string]any{"action": "write", "sessionId": id, "data": "y\n"})
	w = c.Process(map[string]any{"action": "wait", "sessionId": id, "timeout": 10000})
	if w.Text != "got y\n\nProcess exited with code 0." {
		t.Fatalf("after answering: %q", w.Text)
	}
	if _, err := exec.LookPath("python3"); err == nil {
		r = c.Exec(map[string]any{"command": "python3 -q -i", "pty": true, "background": true})
		w = c.Process(map[string]any{"action": "wait", "sessionId": r.Str("sessionId"), "until": "regex", "pattern": "never", "timeout": 10000})
		if w.Str("outcome") != "input" || !strings.Contains(w.Text, "(>>>)") {
			t.Fatalf("python REPL: %q", w.Text)
		}
		c.Process(map[string]any{"action": "kill", "sessionId": r.Str("sessionId")})
	}
}

func TestWaitPartialLine(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "sleep 0.2; printf 'listening on :8080'; sleep 920.1", "background": true})
	w := c.Process(map[string]any{"action": "wait", "sessionId": r.Str("sessionId"), "until": "regex", "pattern": "listening on", "timeout": 10000})
	if w.Str("outcome") != "met" || !strings.HasSuffix(w.Text, "line 1: listening on :8080") {
		t.Fatalf("partial line: %q %v", w.Text, w.D)
	}
	c.Process(map[string]any{"action": "kill", "sessionId": r.Str("sessionId")})
}
