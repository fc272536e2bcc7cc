package process

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// omitRe matches the omission marker of a truncated exec result.
var omitRe = regexp.MustCompile(`\n?\[… (\d+) chars omitted; full output: process log sessionId=(\S+) since=(\d+) …\]\n`)

// splitResult splits a truncated exec result into head, omitted count,
// since cursor and tail.
func splitResult(t *testing.T, text string) (head string, omitted int, since int64, tail string) {
	t.Helper()
	m := omitRe.FindStringSubmatchIndex(text)
	if m == nil {
		t.Fatalf("no omission marker in %d chars: %.200q", len(text), text)
	}
	omitted, _ = strconv.Atoi(text[m[2]:m[3]])
	since, _ = strconv.ParseInt(text[m[6]:m[7]], 10, 64)
	return text[:m[0]], omitted, since, text[m[1]:]
}

// TestResultSeqFitsContext: the default cap keeps `seq 1 100000` to a
// result an MCP client takes whole (16,000 characters, not 200,000), the
// head ends and the tail starts at a line boundary, the omitted count is
// exact, and `process log since=` continues right after the head.
// OpenClaw's 200,000 stays configurable.
func TestResultSeqFitsContext(t *testing.T) {
	var full strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	joined := strings.TrimSuffix(full.String(), "\n")
	for _, tc := range []struct {
		config string
		limit  int
	}{{`{"quotas":{"execPerSecond":0}}`, 16000}, {`{"quotas":{"execPerSecond":0},"tools":{"exec":{"maxOutputChars":200000}}}`, 200000}} {
		t.Run(strconv.Itoa(tc.limit), func(t *testing.T) {
			c := e2etest.StartConch(t, e2etest.NewHome(t, tc.config))
			r := c.Exec(map[string]any{"command": "seq 1 100000", "yieldMs": 60000, "timeout": 60})
			if r.Str("status") != "completed" || r.D["truncated"] != true {
				t.Fatalf("seq: %v %.200q", r.D, r.Text)
			}
			if n := utf8.RuneCountInString(r.Text); n > tc.limit+200 || n < tc.limit*9/10 {
				t.Fatalf("result of %d chars for a cap of %d", n, tc.limit)
			}
			head, omitted, since, tail := splitResult(t, r.Text)
			if !strings.HasPrefix(joined, head+"\n") || !strings.HasSuffix(joined, "\n"+tail) {
				t.Fatalf("not cut at line boundaries: head ends %q, tail starts %q", head[len(head)-10:], tail[:10])
			}
			// The newline before the tail ends the marker's line: shown.
			if want := len(joined) - len(head) - len(tail) - 1; omitted != want {
				t.Fatalf("omitted %d, want %d", omitted, want)
			}
			if len(head) > tc.limit/4 || len(head) < tc.limit/8 {
				t.Fatalf("head of %d chars for a cap of %d", len(head), tc.limit)
			}
			lastHead := head[strings.LastIndexByte(head, '\n')+1:]
			k, _ := strconv.Atoi(lastHead)
			l := c.Process(map[string]any{"action": "log", "sessionId": r.Str("sessionId"), "since": since, "limit": 1})
			if l.Text != strconv.Itoa(k+1) {
				t.Fatalf("log since=%d: %q, want %d", since, l.Text, k+1)
			}
		})
	}
}

// TestResultLongLines: output without newlines keeps a head and a tail,
// cut inside the line, within the same bound, whether it is rendered whole
// (5 MB) or only at its ends (50 MB, over the 8 MiB whole-render limit);
// numbered lines over 8 MiB are cut at line boundaries.
func TestResultLongLines(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"quotas":{"execPerSecond":0}}`))
	const limit = 16000
	for _, tc := range []struct {
		name, cmd string
		size      int
		chars     string // the characters of the output
	}{
		// The case of the report: one 50 MB line of one character.
		{"a-50MB", "head -c 50000000 /dev/zero | tr '\\0' a; printf 'ZZ'", 50000000, "aZ"},
		// Digits without a newline (no repeats to fold), rendered whole
		// and only at its ends.
		{"digits-5MB", "seq 1 2000000 | tr -d '\\n' | head -c 5000000; printf 'ZZ'", 5000000, "0123456789Z"},
		{"digits-50MB", "seq 1 9000000 | tr -d '\\n' | head -c 50000000; printf 'ZZ'", 50000000, "0123456789Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.Exec(map[string]any{"command": tc.cmd, "yieldMs": 120000, "timeout": 120})
			if r.Str("status") != "completed" || r.D["truncated"] != true {
				t.Fatalf("%v %.200q", r.D, r.Text)
			}
			if n := utf8.RuneCountInString(r.Text); n > limit+200 {
				t.Fatalf("result of %d chars", n)
			}
			head, omitted, _, tail := splitResult(t, r.Text)
			if len(head) < limit/8 || strings.Trim(head, tc.chars+"\n") != "" || tc.chars != "aZ" && !strings.HasPrefix(head, "123456789101112") {
				t.Fatalf("head of %d chars: %.50q", len(head), head)
			}
			if len(tail) < limit/2 || !strings.HasSuffix(tail, "ZZ") || strings.Trim(tail, tc.chars+"\n") != "" {
				t.Fatalf("tail of %d chars: …%q", len(tail), tail[max(0, len(tail)-50):])
			}
			// Rendered whole: exact, with the breaks the renderer puts
			// in every 1 MiB of a line; ends only: raw bytes.
			want := tc.size + 2 - len(head) - len(tail)
			if omitted < want || omitted > want+tc.size>>20+1 {
				t.Fatalf("omitted %d, want %d (+ line breaks)", omitted, want)
			}
		})
	}
	t.Run("seq-20MB", func(t *testing.T) {
		r := c.Exec(map[string]any{"command": "seq 1 3000000", "yieldMs": 120000, "timeout": 120})
		head, _, since, tail := splitResult(t, r.Text)
		hl := strings.Split(head, "\n")
		tl := strings.Split(tail, "\n")
		for i, s := range hl {
			if s != strconv.Itoa(i+1) {
				t.Fatalf("head line %d is %q", i, s)
			}
		}
		first, _ := strconv.Atoi(tl[0])
		for i, s := range tl {
			if s != strconv.Itoa(first+i) {
				t.Fatalf("tail line %d is %q (starts mid-line?)", i, s)
			}
		}
		if tl[len(tl)-1] != "3000000" || utf8.RuneCountInString(r.Text) > limit+200 {
			t.Fatalf("tail ends %q, %d chars", tl[len(tl)-1], len(r.Text))
		}
		l := c.Process(map[string]any{"action": "log", "sessionId": r.Str("sessionId"), "since": since, "limit": 1})
		if l.Text != strconv.Itoa(len(hl)+1) {
			t.Fatalf("log since=%d: %q, want %d", since, l.Text, len(hl)+1)
		}
	})
}

// TestPollScreenView: poll and log of a PTY program that draws a screen
// (alternate screen, cursor addressing) return the rows a person would
// see, one per line, trailing blanks cut, not the drawn text run
// together; raw:true still returns the bytes; a line program on a PTY
// keeps its lines.
func TestPollScreenView(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"quotas":{"execPerSecond":0}}`))
	script := `printf '\033[?1049h\033[2J\033[1;1HTITLE LINE\033[5;10HROW FIVE\033[30;1HSTATUS BAR'; sleep 60`
	r := c.Exec(map[string]any{"command": script, "pty": true, "background": true})
	id := r.Str("sessionId")
	defer c.Process(map[string]any{"action": "kill", "sessionId": id})
	if w := c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "regex", "pattern": "STATUS BAR", "timeout": 30000}); w.IsError {
		t.Fatalf("wait: %s", w.Text)
	}
	// The emulator may lag the journal a moment: poll with since 0 until
	// the last row is drawn.
	var p e2etest.Result
	e2etest.Eventually(t, 15*time.Second, func() string {
		p = c.Process(map[string]any{"action": "poll", "sessionId": id, "since": 0})
		if !strings.Contains(p.Text, "STATUS BAR") {
			return "poll: " + p.Text
		}
		return ""
	})
	rows := strings.Split(strings.SplitN(p.Text, "\n[screen ", 2)[0], "\n")
	if p.D["view"] != "screen" || len(rows) != 30 || rows[0] != "TITLE LINE" || rows[1] != "" || rows[4] != "         ROW FIVE" || rows[29] != "STATUS BAR" {
		t.Fatalf("poll of a screen (view %v):\n%s", p.D["view"], p.Text)
	}
	if !strings.HasSuffix(p.Text, ", alternate screen]\n\nProcess still running.") {
		t.Fatalf("poll end: %q", p.Text[max(0, len(p.Text)-80):])
	}
	l := c.Process(map[string]any{"action": "log", "sessionId": id})
	if l.D["view"] != "screen" || !strings.HasPrefix(l.Text, "TITLE LINE\n\n\n\n         ROW FIVE\n") {
		t.Fatalf("log of a screen: %q", l.Text)
	}
	raw := c.Process(map[string]any{"action": "poll", "sessionId": id, "since": 0, "raw": true})
	if raw.D["view"] != nil || !strings.Contains(raw.Text, "\x1b[?1049h") || !strings.Contains(raw.Text, "\x1b[5;10HROW FIVE") {
		t.Fatalf("raw poll: %q", raw.Text)
	}
	// Paging by lines stays a line view.
	if pg := c.Process(map[string]any{"action": "log", "sessionId": id, "offset": 0}); pg.D["view"] != nil || !strings.Contains(pg.Text, "TITLE LINEROW FIVESTATUS BAR") {
		t.Fatalf("log offset 0: %q %v", pg.Text, pg.D["view"])
	}

	// A line program on a PTY, even one that clears the screen first.
	r = c.Exec(map[string]any{"command": `clear; printf 'one\ntwo\n'; sleep 60`, "pty": true, "background": true})
	id2 := r.Str("sessionId")
	defer c.Process(map[string]any{"action": "kill", "sessionId": id2})
	c.Process(map[string]any{"action": "wait", "sessionId": id2, "until": "regex", "pattern": "two", "timeout": 30000})
	// wait has moved the read position past the output: poll from 0.
	if q := c.Process(map[string]any{"action": "poll", "sessionId": id2, "since": 0}); q.D["view"] != nil || !strings.HasPrefix(q.Text, "one\ntwo\n\nProcess still running.") {
		t.Fatalf("poll of a line program: %q %v", q.Text, q.D["view"])
	}
}

// TestPollScreenViewVim: the same for vim, the program of the report.
func TestPollScreenViewVim(t *testing.T) {
	vim := needProgram(t, "vim")
	t.Setenv("TERM", "xterm-256color")
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"quotas":{"execPerSecond":0}}`))
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("first line\nsecond line\nthird line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.Exec(map[string]any{"command": vim + " -u NONE -i NONE -N -n " + file, "pty": true, "background": true})
	id := r.Str("sessionId")
	defer c.Process(map[string]any{"action": "kill", "sessionId": id})
	var p e2etest.Result
	e2etest.Eventually(t, 15*time.Second, func() string {
		p = c.Process(map[string]any{"action": "poll", "sessionId": id, "since": 0})
		// The screen view needs a snapshot from the supervisor; a poll
		// whose snapshot fails (a loaded machine) falls back to lines.
		if !strings.Contains(p.Text, `notes.txt" 3L`) || p.D["view"] != "screen" {
			return "poll: " + p.Text
		}
		// vim may draw its file message before the last "~" rows: a
		// snapshot in between is a true picture of a screen not yet drawn.
		if rows := strings.Split(strings.SplitN(p.Text, "\n[screen ", 2)[0], "\n"); len(rows) == 30 && rows[28] != "~" {
			return "screen not drawn yet: " + p.Text
		}
		return ""
	})
	rows := strings.Split(strings.SplitN(p.Text, "\n[screen ", 2)[0], "\n")
	if p.D["view"] != "screen" || len(rows) != 30 || rows[0] != "first line" || rows[2] != "third line" || rows[3] != "~" || rows[28] != "~" {
		t.Fatalf("poll of vim:\n%s", p.Text)
	}
	if n := len(p.Text); n > 1000 {
		t.Errorf("poll of vim is %d bytes", n)
	}
	// Typing in insert mode draws without cursor addressing; the program
	// is still on the alternate screen, so the next poll is a screen too.
	c.Process(map[string]any{"action": "send-keys", "sessionId": id, "literal": "ix"})
	e2etest.Eventually(t, 15*time.Second, func() string {
		p = c.Process(map[string]any{"action": "poll", "sessionId": id})
		if p.D["view"] != "screen" || !strings.HasPrefix(p.Text, "xfirst line\n") {
			return "poll after typing: " + p.Text
		}
		return ""
	})
}
