package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// paddedRows returns the lines of text that end in a run of 8 or more
// spaces: the raw rows of a full-screen program, padded to the terminal's
// width, that a model should never be shown.
func paddedRows(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasSuffix(l, strings.Repeat(" ", 8)) {
			out = append(out, l)
		}
	}
	return out
}

// checkScreenResult fails when a result of a full-screen session shows
// raw padded rows, or more text than its screen view (plus the result's
// own lines) takes.
func checkScreenResult(t *testing.T, what string, r e2etest.Result, screenChars int) {
	t.Helper()
	if p := paddedRows(r.Text); len(p) > 0 {
		t.Errorf("%s: %d padded rows (%d chars), e.g. %q; text:\n%s", what, len(p), len(r.Text), p[0], r.Text)
	}
	if len(r.Text) > screenChars+600 {
		t.Errorf("%s: %d chars, the screen takes %d:\n%s", what, len(r.Text), screenChars, r.Text)
	}
	if tail := r.Str("tail"); len(paddedRows(tail)) > 0 {
		t.Errorf("%s: details.tail has padded rows:\n%s", what, tail)
	}
}

// TestFullScreenResults runs full-screen programs under a PTY (vim on the
// alternate screen, top repainting from the home position on the main
// screen) and checks every result the model gets of them (exec's running
// result, poll, wait, log, list) shows the screen view, never the raw
// padded rows.
func TestFullScreenResults(t *testing.T) {
	vim := needProgram(t, "vim")
	top := needProgram(t, "top")
	t.Setenv("TERM", "xterm-256color")
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("first line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command string
		drawn         func(e2etest.Result) bool // the screen shows the program's whole first frame
	}{
		{"vim", vim + " -u NONE -i NONE -N -n " + file, func(r e2etest.Result) bool {
			l := screenLines(r)
			return len(l) == 30 && l[0] == "first line" && l[28] == "~" && strings.Contains(l[29], "notes.txt")
		}},
		// -d 1: a repaint a second, so that two frames are in the
		// output within a few seconds.
		{"top", top + " -d 1", func(r e2etest.Result) bool {
			return strings.HasPrefix(r.Text, "top - ") && strings.Contains(r.Text, "PID")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.Exec(map[string]any{"command": tc.command, "pty": true, "yieldMs": 1500})
			id := r.Str("sessionId")
			if id == "" {
				t.Fatalf("exec: %s", r.Text)
			}
			defer c.Process(map[string]any{"action": "kill", "sessionId": id})
			scr := c.WaitScreen(id, "the first frame", tc.drawn)
			n := len(scr.Text)
			checkScreenResult(t, "exec running result", r, n)
			// Let the program draw more (top repaints), then read.
			c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "idle", "idleMs": 300, "timeout": 3000})
			if tc.name == "top" {
				// Two repaints after the first frame.
				c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "regex", "pattern": "^top - ", "since": scr.Num("cursor"), "timeout": 10000})
			}
			w := c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "idle", "idleMs": 200, "timeout": 5000, "since": 0})
			checkScreenResult(t, "wait since 0", w, n)
			if w.Str("view") != "screen" {
				t.Errorf("wait: view %q, want screen", w.Str("view"))
			}
			time.Sleep(0)
			p := c.Process(map[string]any{"action": "poll", "sessionId": id, "since": 0})
			checkScreenResult(t, "poll since 0", p, n)
			l := c.Process(map[string]any{"action": "log", "sessionId": id})
			checkScreenResult(t, "log", l, n)
			ls := c.Process(map[string]any{"action": "list"})
			if p := paddedRows(ls.Text); len(p) > 0 {
				t.Errorf("list: padded rows:\n%s", ls.Text)
			}
			for _, s := range ls.D["sessions"].([]any) {
				if tail, _ := s.(map[string]any)["tail"].(string); len(paddedRows(tail)) > 0 {
					t.Errorf("list: a session's tail has padded rows:\n%s", tail)
				}
			}
		})
	}
}

// TestRunningTextNamesNextActions: the running result says what can be
// done next with the kind of session it is: keys, lines and pastes for
// a terminal, writes for a pipe, no input for a closed stdin.
func TestRunningTextNamesNextActions(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	for _, tc := range []struct {
		args      map[string]any
		stdin     string
		want, not []string
	}{
		{map[string]any{"pty": true, "background": true}, "pty", []string{"send-keys", "submit", "paste", "screen"}, []string{"/write/"}},
		{map[string]any{"background": true}, "open", []string{"write"}, []string{"send-keys", "paste"}},
		{map[string]any{"yieldMs": 10}, "closed", []string{"stdin is closed"}, []string{"write", "send-keys"}},
	} {
		tc.args["command"] = "sleep 903.1"
		r := c.Exec(tc.args)
		id := r.Str("sessionId")
		if id == "" {
			t.Fatalf("exec %v: %s", tc.args, r.Text)
		}
		c.Process(map[string]any{"action": "kill", "sessionId": id})
		if r.Str("stdin") != tc.stdin {
			t.Errorf("%v: stdin %q, want %q", tc.args, r.Str("stdin"), tc.stdin)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.Text, w) {
				t.Errorf("%s session: running text does not name %q: %s", tc.stdin, w, r.Text)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(r.Text, w) {
				t.Errorf("%s session: running text names %q: %s", tc.stdin, w, r.Text)
			}
		}
	}
}

// TestSubmitSendsData: submit with data sends the line and then Enter
// (it used to drop the data and answer "sent CR"), for a PTY and a pipe.
func TestSubmitSendsData(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	for _, pty := range []bool{true, false} {
		r := c.Exec(map[string]any{"command": "read -r line; echo got:$line", "pty": pty, "background": true})
		id := r.Str("sessionId")
		if id == "" {
			t.Fatalf("exec: %s", r.Text)
		}
		s := c.Process(map[string]any{"action": "submit", "sessionId": id, "data": "hello"})
		if s.IsError || !strings.Contains(s.Text, "sent 5 bytes, then") {
			t.Errorf("pty %v: submit: %q", pty, s.Text)
		}
		end := c.WaitEnd(id, 30*time.Second)
		if !strings.Contains(end.Text, "got:hello") {
			t.Errorf("pty %v: the command did not read the line: %q", pty, end.Text)
		}
	}
}

// TestExecTimeoutUnitWarning: a timeout implausible as seconds (a model
// sending milliseconds) runs as sent, with a warning naming the unit.
func TestExecTimeoutUnitWarning(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "echo ok", "timeout": 30000})
	if r.IsError || !strings.Contains(r.Text, "timeout 30000 is in seconds (8 h 20 min)") {
		t.Errorf("timeout 30000: %q", r.Text)
	}
	if w, _ := r.D["warnings"].([]any); len(w) == 0 {
		t.Errorf("timeout 30000: no warnings in details: %v", r.D)
	}
	if r := c.Exec(map[string]any{"command": "echo ok", "timeout": 600}); r.Text != "ok" {
		t.Errorf("timeout 600: %q", r.Text)
	}
}
