package bound

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/internal/term/render"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// boundMax is the maxOutputChars of the bound tests (the smallest the
// config takes) and boundSlack the fixed allowance for inline events,
// markers and state lines that docs/tools.md promises on top of it.
const (
	boundMax   = 1000
	boundSlack = 2000
)

const boundConfig = `{"quotas":{"execPerSecond":0},"tools":{"exec":{"maxOutputChars":1000}}}`

// outputShape generates the bytes of one shape of command output, scaled
// to about size bytes.
type outputShape struct {
	name string
	gen  func(size int) []byte
}

var outputShapes = []outputShape{
	{"one-line", func(n int) []byte { return bytes.Repeat([]byte("x"), n) }},
	{"one-line-lf", func(n int) []byte { return append(bytes.Repeat([]byte("é"), n/2), '\n') }},
	{"long-lines", func(n int) []byte {
		// Lines of up to 1 MiB, some over the 1 MiB line break.
		var b bytes.Buffer
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "%d:", i)
			b.Write(bytes.Repeat([]byte{'a' + byte(i%26)}, min(n/8+i*7, 1<<20+1000)))
			b.WriteByte('\n')
		}
		return b.Bytes()
	}},
	{"short-lines", func(n int) []byte {
		var b bytes.Buffer
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		return b.Bytes()
	}},
	{"binary", func(n int) []byte {
		b := make([]byte, n)
		rnd := rand.New(rand.NewPCG(uint64(n), 7))
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}},
}

// checkBound fails t if r's text is over the bound.
func checkBound(t *testing.T, what string, r e2etest.Result) {
	t.Helper()
	if n := utf8.RuneCountInString(r.Text); n > boundMax+boundSlack {
		t.Errorf("%s: text of %d chars over the bound %d+%d: %.300q", what, n, boundMax, boundSlack, r.Text)
	}
}

// writeShape writes a shape's bytes to a file for `cat`.
func writeShape(t *testing.T, sh outputShape, size int) (string, []byte) {
	t.Helper()
	b := sh.gen(size)
	path := filepath.Join(t.TempDir(), sh.name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, b
}

// TestResultBoundEveryAction generates the members of "a result too large
// for a model's context": every action that returns output or echoes
// input, over every shape of 20 MB output, through the real binary; each
// text must stay within maxOutputChars plus the fixed allowance.
func TestResultBoundEveryAction(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, boundConfig))
	// rawCall: the queued events at the top of a text count too.
	proc := func(args map[string]any) e2etest.Result { t.Helper(); return c.RawCall("process", args) }
	exec := func(args map[string]any) e2etest.Result { t.Helper(); return c.RawCall("exec", args) }
	const size = 20_000_000
	var ids []string
	for _, sh := range outputShapes {
		t.Run(sh.name, func(t *testing.T) {
			path, raw := writeShape(t, sh, size)
			r := exec(map[string]any{"command": "cat " + path, "yieldMs": 120000, "timeout": 120})
			checkBound(t, "exec", r)
			id := r.Str("sessionId")
			if id == "" || r.Str("status") != "completed" || r.Num("outputBytes") != float64(len(raw)) {
				t.Fatalf("exec: %v %.300q", r.D, r.Text)
			}
			ids = append(ids, id)
			// The same output read by a background session: poll.
			bg := exec(map[string]any{"command": "cat " + path, "background": true})
			bid := bg.Str("sessionId")
			checkBound(t, "poll", c.WaitEnd(bid, 120*time.Second))
			ids = append(ids, bid)
			one := 1.0
			for _, args := range []map[string]any{
				{"action": "log"},
				{"action": "log", "limit": 100000},
				{"action": "log", "limit": 3},
				{"action": "log", "offset": 0},
				{"action": "log", "offset": 1, "limit": 100000},
				{"action": "log", "since": 0},
				{"action": "log", "since": 0, "limit": 100000},
				{"action": "log", "since": 5, "limit": one},
				{"action": "log", "raw": true},
				{"action": "log", "raw": true, "since": 0},
				{"action": "poll", "since": 0},
				{"action": "poll", "since": 0, "raw": true},
				{"action": "search", "pattern": "."},
				{"action": "search", "pattern": ".", "context": 20, "max": 1000},
				{"action": "search", "pattern": "x|a|e|line|\ufffd", "context": 3, "max": 1000},
				{"action": "wait", "until": "regex", "pattern": ".", "timeout": 5000},
				{"action": "wait", "until": "exit", "timeout": 5000},
				{"action": "screen"},
				{"action": "kill"},
				{"action": "write", "data": "x"},
			} {
				args["sessionId"] = bid
				r := proc(args)
				checkBound(t, fmt.Sprint(args), r)
				if args["action"] == "log" {
					// log shapes its own pages: the last guard never acts.
					text := r.Text
					if i := strings.LastIndex(text, "[conch event] "); i >= 0 {
						_, text, _ = strings.Cut(text[i:], "\n\n")
					}
					if n := utf8.RuneCountInString(text); n > boundMax+300 || strings.Contains(text, " chars omitted …]") {
						t.Errorf("%v: a page of %d chars, not shaped by log: %.200q", args, n, text)
					}
				}
			}
		})
	}
	t.Run("pty-screen", func(t *testing.T) {
		// A program that fills a terminal screen: screen, and poll and
		// log in their screen view.
		path, _ := writeShape(t, outputShapes[4], 2_000_000)
		r := exec(map[string]any{"command": "printf '\\033[?1049h\\033[H'; cat " + path + "; sleep 600", "pty": true, "background": true})
		id := r.Str("sessionId")
		if id == "" {
			t.Fatalf("exec: %.300q", r.Text)
		}
		ids = append(ids, id)
		for _, args := range []map[string]any{
			{"action": "screen"}, {"action": "poll", "since": 0}, {"action": "log"}, {"action": "log", "raw": true},
			{"action": "wait", "until": "idle", "idleMs": 500, "timeout": 30000},
			{"action": "screen"}, {"action": "poll", "since": 0}, {"action": "log"}, {"action": "kill"},
		} {
			args["sessionId"] = id
			checkBound(t, fmt.Sprint(args), proc(args))
		}
	})
	huge := strings.Repeat("y", 10_000_000)
	// A command is at most 128 KiB: a long one that gets through to the
	// policy and the shell.
	long := strings.Repeat("y", 120_000)
	checkBound(t, "list", proc(map[string]any{"action": "list"}))
	for name, call := range map[string]func() e2etest.Result{
		"unknown action":    func() e2etest.Result { return proc(map[string]any{"action": huge}) },
		"unknown session":   func() e2etest.Result { return proc(map[string]any{"action": "log", "sessionId": huge}) },
		"unknown parameter": func() e2etest.Result { return exec(map[string]any{"command": "true", huge: 1}) },
		"bad enum": func() e2etest.Result {
			return proc(map[string]any{"action": "log", "sessionId": ids[0], "stream": huge})
		},
		"bad pattern": func() e2etest.Result {
			return proc(map[string]any{"action": "search", "sessionId": ids[0], "pattern": "(" + huge})
		},
		"no match": func() e2etest.Result {
			return proc(map[string]any{"action": "search", "sessionId": ids[0], "pattern": "^Q" + huge})
		},
		"huge command": func() e2etest.Result {
			return exec(map[string]any{"command": "echo " + long + " | wc -c", "yieldMs": 60000})
		},
		"10 MB command":    func() e2etest.Result { return exec(map[string]any{"command": "echo " + huge}) },
		"huge bad command": func() e2etest.Result { return exec(map[string]any{"command": "echo '" + long}) },
		"denied command": func() e2etest.Result {
			return exec(map[string]any{"command": "frobnicate " + long, "security": "allowlist", "ask": "off"})
		},
		"huge env key": func() e2etest.Result {
			return exec(map[string]any{"command": "true", "env": map[string]any{huge: "x"}})
		},
		"huge env value": func() e2etest.Result {
			return exec(map[string]any{"command": "true", "env": map[string]any{"PATH": huge}})
		},
		"huge workdir": func() e2etest.Result {
			return exec(map[string]any{"command": "true", "workdir": "/nonexistent/" + huge})
		},
		"huge wait target": func() e2etest.Result {
			return proc(map[string]any{"action": "wait", "sessionId": ids[0], "until": "file", "path": huge, "timeout": 10})
		},
		"huge regex wait": func() e2etest.Result {
			return proc(map[string]any{"action": "wait", "sessionId": ids[0], "until": "regex", "pattern": "x|" + huge, "timeout": 10})
		},
	} {
		checkBound(t, name, call())
	}
	for _, id := range ids {
		checkBound(t, "remove", proc(map[string]any{"action": "remove", "sessionId": id}))
	}
}

// hintRe matches the hint of a log page cut by the output budget.
var hintRe = regexp.MustCompile(`\n\n\[page ends at the output budget \(\d+ chars\); next page: process log sessionId=\S+ (since|offset)=(\d+)( limit=\d+)?\]$`)

// tailRe matches the hint of a log tail cut by the output budget.
var tailRe = regexp.MustCompile(`\n\n\[showing last (\d+) of \d+ lines \(output budget \d+ chars\); earlier lines: process log sessionId=\S+ offset=(\d+) limit=(\d+)\]$`)

// TestLogPagesReassemble: a log page stops at the output budget and names
// the cursor (since) or the offset of the next page; following them from
// the start reassembles the rendered output exactly — every line once, a
// line longer than the budget in pieces — for every shape.
func TestLogPagesReassemble(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, boundConfig))
	for _, sh := range outputShapes {
		t.Run(sh.name, func(t *testing.T) {
			path, raw := writeShape(t, sh, 40_000)
			r := c.Exec(map[string]any{"command": "cat " + path, "yieldMs": 60000, "timeout": 60})
			id := r.Str("sessionId")
			if r.Str("status") != "completed" {
				t.Fatalf("exec: %v %.300q", r.D, r.Text)
			}
			var want []string
			for _, l := range render.Lines(raw, 0, render.Options{MaxLineBytes: boundMax}) {
				want = append(want, l.Text)
			}
			// A tail keeps the last lines that fit and names the ones
			// asked for before them.
			for _, lastN := range []int{200, 5} {
				args := map[string]any{"action": "log", "sessionId": id}
				if lastN != 200 {
					args["limit"] = lastN
				}
				p := c.Process(args)
				checkBound(t, fmt.Sprint(args), p)
				text := p.Text
				m := tailRe.FindStringSubmatch(text)
				if m != nil {
					text = text[:len(text)-len(m[0])]
				}
				lines := strings.Split(text, "\n")
				if len(want) < len(lines) || strings.Join(want[len(want)-len(lines):], "\n") != text {
					t.Fatalf("tail of %d: not the last %d lines: %.200q", lastN, len(lines), text)
				}
				if m == nil {
					if len(lines) < min(lastN, len(want)) {
						t.Fatalf("tail of %d: %d lines without a hint", lastN, len(lines))
					}
					continue
				}
				shown, _ := strconv.Atoi(m[1])
				off, _ := strconv.Atoi(m[2])
				lim, _ := strconv.Atoi(m[3])
				if shown != len(lines) || off != max(len(want)-lastN, 0) || off+lim != len(want)-len(lines) {
					t.Fatalf("tail of %d of %d lines: hint %q for %d shown lines", lastN, len(want), m[0], len(lines))
				}
			}
			for _, mode := range []string{"since", "offset"} {
				var got []string
				pos, pages := 0, 0
				for {
					args := map[string]any{"action": "log", "sessionId": id, mode: pos}
					p := c.Process(args)
					checkBound(t, fmt.Sprint(mode, "=", pos), p)
					pages++
					if pages > 2000 {
						t.Fatalf("%s: more than 2000 pages", mode)
					}
					m := hintRe.FindStringSubmatchIndex(p.Text)
					text := p.Text
					if m != nil {
						text = p.Text[:m[0]]
					}
					got = append(got, strings.Split(text, "\n")...)
					if m == nil {
						break
					}
					if kind := p.Text[m[2]:m[3]]; kind != mode {
						t.Fatalf("%s page continues with %s", mode, kind)
					}
					next, _ := strconv.Atoi(p.Text[m[4]:m[5]])
					if mode == "since" && int64(next) != int64(p.Num("cursor")) {
						t.Fatalf("hint since=%d, details cursor %v", next, p.Num("cursor"))
					}
					if next <= pos {
						t.Fatalf("%s=%d: next page at %d", mode, pos, next)
					}
					pos = next
				}
				if len(want) == 0 {
					want = []string{"(no output recorded)"}
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("%s: %d pages give %d lines, want %d; first difference at line %d", mode, pages, len(got), len(want), firstDiff(got, want))
				}
				if pages < 2 {
					t.Fatalf("%s: one page for %d bytes of output", mode, len(raw))
				}
			}
		})
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// eventRe matches an exit notice of the bound tests.
var eventRe = regexp.MustCompile(`^\[conch event\] Exec completed \(([^,]+), code 0\) :: done-\d+ `)

// TestResultBoundEvents: many queued events do not push a result over the
// bound; those that do not fit come with the next results, each once.
func TestResultBoundEvents(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, boundConfig))
	const n = 40
	want := map[string]bool{}
	got := map[string]int{}
	collect := func(what string, r e2etest.Result) {
		checkBound(t, what, r)
		for _, line := range strings.Split(r.Text, "\n") {
			if m := eventRe.FindStringSubmatch(line); m != nil {
				if got[m[1]]++; got[m[1]] > 1 {
					t.Fatalf("event delivered twice: %q", line)
				}
			}
		}
	}
	// The sessions end together once go exists, so that their events
	// queue up for one result. A long output line makes each snippet
	// long (180 chars).
	dir := t.TempDir()
	for i := range n {
		cmd := fmt.Sprintf("while [ ! -e %s/go ]; do sleep 0.02; done; echo done-%d %s; touch %s/fin-%d", dir, i, strings.Repeat("z", 300), dir, i)
		r := c.RawCall("exec", map[string]any{"command": cmd, "background": true})
		want[r.Str("sessionId")] = true
		collect("exec with events", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, 60*time.Second, func() string {
		if fins, _ := filepath.Glob(filepath.Join(dir, "fin-*")); len(fins) < n {
			return fmt.Sprintf("%d of %d sessions done", len(fins), n)
		}
		return ""
	})
	// A session to pause on (poll with a timeout) between reads: waiting
	// on the others would observe their end and drop their events.
	pr := c.RawCall("exec", map[string]any{"command": "sleep 600", "background": true})
	collect("exec with events", pr)
	pause := pr.Str("sessionId")
	defer c.Process(map[string]any{"action": "kill", "sessionId": pause})
	deadline := time.Now().Add(120 * time.Second)
	for len(got) < n {
		for id := range got {
			if !want[id] {
				t.Fatalf("event of an unknown session %s", id)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events after 120s: %q", len(got), n, c.RawCall("process", map[string]any{"action": "list"}).Text)
		}
		collect("list with events", c.RawCall("process", map[string]any{"action": "list"}))
		collect("poll with events", c.RawCall("process", map[string]any{"action": "poll", "sessionId": pause, "timeout": 300}))
	}
}
