package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
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
			c := startConch(t, newHome(t, tc.config))
			r := c.exec(map[string]any{"command": "seq 1 100000", "yieldMs": 60000, "timeout": 60})
			if r.str("status") != "completed" || r.D["truncated"] != true {
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
			l := c.process(map[string]any{"action": "log", "sessionId": r.str("sessionId"), "since": since, "limit": 1})
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
	c := startConch(t, newHome(t, `{"quotas":{"execPerSecond":0}}`))
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
			r := c.exec(map[string]any{"command": tc.cmd, "yieldMs": 120000, "timeout": 120})
			if r.str("status") != "completed" || r.D["truncated"] != true {
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
		r := c.exec(map[string]any{"command": "seq 1 3000000", "yieldMs": 120000, "timeout": 120})
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
		l := c.process(map[string]any{"action": "log", "sessionId": r.str("sessionId"), "since": since, "limit": 1})
		if l.Text != strconv.Itoa(len(hl)+1) {
			t.Fatalf("log since=%d: %q, want %d", since, l.Text, len(hl)+1)
		}
	})
}
