package process

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

func needProgram(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
	return p
}

// screenLines returns the text's rows without the footer.
func screenLines(r e2etest.Result) []string {
	text, _, _ := strings.Cut(r.Text, "\n[screen ")
	return strings.Split(text, "\n")
}

func TestScreenVim(t *testing.T) {
	vim := needProgram(t, "vim")
	t.Setenv("TERM", "xterm-256color")
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("first line\nsecond line\nthird line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.Exec(map[string]any{"command": vim + " -u NONE -i NONE -N -n " + file, "pty": true, "background": true})
	id := r.Str("sessionId")
	if id == "" {
		t.Fatalf("exec: %s", r.Text)
	}
	defer c.Process(map[string]any{"action": "kill", "sessionId": id})

	// Some vim builds print the file message before they draw the
	// buffer; wait for both.
	r = c.WaitScreen(id, "the file", func(r e2etest.Result) bool {
		l := screenLines(r)
		return strings.Contains(r.Text, `notes.txt" 3L`) && len(l) == 30 && l[0] == "first line" && l[28] == "~"
	})
	lines := screenLines(r)
	if len(lines) != 30 {
		t.Fatalf("vim fills 30 rows, got %d:\n%s", len(lines), r.Text)
	}
	if lines[0] != "first line" || lines[1] != "second line" || lines[2] != "third line" || lines[3] != "~" || lines[28] != "~" {
		t.Errorf("vim screen:\n%s", r.Text)
	}
	if !strings.HasPrefix(lines[29], `"`+file+`" 3L, 34B`) {
		t.Errorf("message line = %q", lines[29])
	}
	if !strings.HasSuffix(r.Text, "\n[screen 120x30, cursor 1,1, alternate screen]") {
		t.Errorf("footer: %q", r.Text[strings.LastIndex(r.Text, "\n")+1:])
	}
	if r.Str("status") != "running" || r.Num("cols") != 120 || r.Num("rows") != 30 || r.D["altScreen"] != true ||
		r.Num("cursorRow") != 1 || r.Num("cursorCol") != 1 || r.D["approximate"] != false || r.Num("cursor") <= 0 {
		t.Errorf("details: %v", r.D)
	}
	if dl, _ := r.D["lines"].([]any); len(dl) != 30 || dl[0] != "first line" {
		t.Errorf("details lines: %v", r.D["lines"])
	}

	c.Process(map[string]any{"action": "send-keys", "sessionId": id, "keys": []any{"i"}})
	c.WaitScreen(id, "insert mode", func(r e2etest.Result) bool {
		l := screenLines(r)
		return len(l) == 30 && strings.HasPrefix(l[29], "-- INSERT --")
	})
	c.Process(map[string]any{"action": "send-keys", "sessionId": id, "literal": "hello"})
	c.Process(map[string]any{"action": "send-keys", "sessionId": id, "keys": []any{"Esc"}})
	r = c.WaitScreen(id, "the edit", func(r e2etest.Result) bool {
		l := screenLines(r)
		return l[0] == "hellofirst line" && !strings.Contains(r.Text, "INSERT")
	})
	// Normal mode puts the cursor on the last inserted character.
	if !strings.HasSuffix(r.Text, "[screen 120x30, cursor 1,5, alternate screen]") {
		t.Errorf("after the edit:\n%s", r.Text)
	}

	c.Process(map[string]any{"action": "send-keys", "sessionId": id, "literal": ":q!", "keys": []any{"Enter"}})
	c.WaitEnd(id, 10*time.Second)
	// Rebuilt from the journal: vim left the alternate screen.
	r = c.Screen(id)
	if r.IsError || r.D["altScreen"] != false || r.Str("status") != "completed" || strings.Contains(r.Text, "hellofirst") {
		t.Errorf("after vim quit:\n%s\n%v", r.Text, r.D)
	}
}

// progressUI redraws a line with \r and ESC[K and two bars with cursor
// movements, then finishes and waits.
const progressUI = `printf 'header\n'
for i in 0 10 20 30 40 50 60 70 80 90 100; do
  printf '\033[Ka: %s%%\n\033[Kb: %s%%\n' $i $((i/2))
  printf '\033[2A'
done
printf '\033[2B'
for i in 1 2 3 4 5 6 7 8 9 10; do printf '\rprogress %s0%%\033[K' $i; done
printf '\rdone\033[K\n'
printf '\033]2;progress title\007'
sleep 60`

func TestScreenProgressUI(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": progressUI, "pty": true, "background": true})
	id := r.Str("sessionId")
	want := "header\na: 100%\nb: 50%\ndone\n[screen 120x30, cursor 5,1, main screen]"
	r = c.WaitScreen(id, "the final state", func(r e2etest.Result) bool { return r.Text == want })
	if r.Str("status") != "running" || r.Str("title") != "progress title" || r.D["cursorVisible"] != true || r.D["approximate"] != false {
		t.Errorf("details: %v", r.D)
	}
	live := r.Num("cursor")

	// Finished: the same screen, rebuilt from the journal.
	c.Process(map[string]any{"action": "kill", "sessionId": id})
	c.WaitEnd(id, 10*time.Second)
	r = c.Screen(id)
	if r.Text != want {
		t.Errorf("finished screen:\n%s\nwant:\n%s", r.Text, want)
	}
	if r.Str("status") != "failed" || r.Str("title") != "progress title" || r.D["approximate"] != false || r.Num("cursor") != live {
		t.Errorf("finished details: %v (live cursor %v)", r.D, live)
	}
}

func TestScreenFinishedPTY(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "printf 'one\\ntwo\\n\\033[1mbold\\033[0m'", "pty": true, "background": true})
	id := r.Str("sessionId")
	c.WaitEnd(id, 10*time.Second)
	r = c.Screen(id)
	if want := "one\ntwo\nbold\n[screen 120x30, cursor 3,5, main screen]"; r.Text != want {
		t.Errorf("screen = %q, want %q", r.Text, want)
	}
	if r.Str("status") != "completed" || r.Str("sessionId") != id || r.Num("cursor") != 22 || r.D["approximate"] != false {
		t.Errorf("details: %v", r.D)
	}
}

// dsrProbe asks the terminal for the cursor position (both forms) and the
// device attributes in raw mode and prints the answers as hex. Without
// answers it would wait for ever.
const dsrProbe = `import os, sys, tty
tty.setraw(0)
def ask(q, end):
    os.write(1, q)
    b = b""
    while not b.endswith(end):
        b += os.read(0, 1)
    return b.hex()
a = ask(b"abc\x1b[6n", b"R")
b = ask(b"\x1b[?6n", b"R")
c = ask(b"\x1b[c", b"c")
os.write(1, ("\r\ncpr=" + a + " xcpr=" + b + " da=" + c + "\r\n").encode())
`

func TestScreenAnswersCursorQueries(t *testing.T) {
	needProgram(t, "python3")
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "python3 -c '" + dsrProbe + "'", "pty": true, "timeout": 20})
	if r.Str("status") != "completed" {
		t.Fatalf("probe did not complete: %s %v", r.Text, r.D)
	}
	// ESC[1;4R: row 1, column 4 (after "abc"); ESC[?1;4…R; ESC[?…c.
	if !strings.Contains(r.Text, "cpr=1b5b313b3452 ") {
		t.Errorf("cursor position report: %q", r.Text)
	}
	if !strings.Contains(r.Text, "xcpr=1b5b3f313b34") {
		t.Errorf("extended cursor position report: %q", r.Text)
	}
	if !strings.Contains(r.Text, "da=1b5b3f") {
		t.Errorf("device attributes: %q", r.Text)
	}
}

func TestScreenTop(t *testing.T) {
	top := needProgram(t, "top")
	t.Setenv("TERM", "xterm-256color")
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": top + " -d 1", "pty": true, "background": true})
	id := r.Str("sessionId")
	defer c.Process(map[string]any{"action": "kill", "sessionId": id})
	r = c.WaitScreen(id, "top's header", func(r e2etest.Result) bool {
		l := screenLines(r)
		return len(l) > 8 && strings.HasPrefix(l[0], "top - ") && strings.HasPrefix(l[1], "Tasks:") &&
			strings.Contains(r.Text, "PID USER")
	})
	if r.D["cursorVisible"] != false {
		t.Errorf("top hides the cursor: %v", r.D)
	}
	for _, l := range screenLines(r) {
		if strings.Contains(l, "\x1b") {
			t.Errorf("escape left in screen line %q", l)
		}
	}
	c.Process(map[string]any{"action": "send-keys", "sessionId": id, "literal": "q"})
	c.WaitEnd(id, 10*time.Second)
}

func TestScreenNotPTY(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "sleep 30", "background": true})
	id := r.Str("sessionId")
	defer c.Process(map[string]any{"action": "kill", "sessionId": id})
	r = c.Screen(id)
	errObj, _ := r.D["error"].(map[string]any)
	if !r.IsError || r.Text != "Session "+id+" has no terminal (not a PTY session)." || errObj["code"] != "invalid_state" {
		t.Errorf("screen of a pipe session: %q %v", r.Text, r.D)
	}
	r = c.Process(map[string]any{"action": "screen", "sessionId": "nope"})
	if !r.IsError || r.Text != "No session found for nope" {
		t.Errorf("screen of a missing session: %q", r.Text)
	}
}

// Output the emulator cannot keep up with neither slows the program down
// nor loses the final screen.
func TestScreenLargeOutput(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "seq 1 1000000; echo end-of-output; sleep 60", "pty": true, "background": true})
	id := r.Str("sessionId")
	start := time.Now()
	r = c.WaitScreen(id, "the end", func(r e2etest.Result) bool { return strings.Contains(r.Text, "end-of-output") })
	t.Logf("live screen after %v, approximate=%v", time.Since(start), r.D["approximate"])
	lines := screenLines(r)
	if len(lines) != 29 || lines[0] != "999973" || lines[27] != "1000000" || lines[28] != "end-of-output" {
		t.Errorf("live screen:\n%s", r.Text)
	}
	c.Process(map[string]any{"action": "kill", "sessionId": id})
	c.WaitEnd(id, 10*time.Second)
	start = time.Now()
	f := c.Screen(id)
	t.Logf("finished screen in %v", time.Since(start))
	if screenLines(f)[28] != "end-of-output" || f.D["approximate"] != true || f.Num("cursor") != 7888911 {
		t.Errorf("finished screen:\n%s\n%v", f.Text, f.D)
	}
}
