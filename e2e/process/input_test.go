package process

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestBadInput(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	cases := []struct {
		tool string
		args map[string]any
		code string
		text string
	}{
		{"process", map[string]any{"action": "dance"}, "invalid_argument", "Unknown action dance"},
		{"process", map[string]any{"action": "poll"}, "invalid_argument", "sessionId is required for this action."},
		{"process", map[string]any{"action": "poll", "sessionId": "no-such-session"}, "not_found", "No session found for no-such-session"},
		{"process", map[string]any{"action": "kill", "sessionId": "no-such-session"}, "not_found", "No session found for no-such-session"},
		{"process", map[string]any{"action": "list", "bogus": 1}, "invalid_argument", `Unknown parameter "bogus".`},
		{"exec", map[string]any{"command": "   "}, "invalid_argument", "Provide a command to start."},
		{"exec", map[string]any{"command": "true", "cwd": "/"}, "invalid_argument", `Unknown parameter "cwd".`},
		{"exec", map[string]any{"command": "true", "yieldMs": "soon"}, "invalid_argument", `Invalid parameter "yieldMs": expected a number.`},
		{"exec", map[string]any{"command": "true", "host": "mars"}, "invalid_argument", `Invalid host "mars": expected one of sandbox, gateway, node.`},
		{"exec", map[string]any{"command": "true", "host": "sandbox"}, "sandbox_unavailable", "exec host=sandbox is configured, but sandbox runtime is unavailable for this session.\nEnable sandboxing (sandbox.mode) with an available backend (bwrap, docker or landlock), or use host=gateway with approvals."},
		{"exec", map[string]any{"command": "true", "host": "NODE"}, "host_not_allowed", "exec host not allowed (requested node; configure tools.exec.host=node to allow)."},
		{"exec", map[string]any{"command": "true", "env": map[string]any{"PATH": "/tmp"}}, "security_violation", "Security Violation: Custom 'PATH' variable is forbidden during host execution."},
		{"exec", map[string]any{"command": "true", "env": map[string]any{"LD_PRELOAD": "x", "NODE_OPTIONS": "y"}}, "security_violation", "Security Violation: Environment variables 'LD_PRELOAD', 'NODE_OPTIONS' are forbidden during host execution."},
		{"exec", map[string]any{"command": "true", "idempotencyKey": "has space"}, "invalid_argument", "Invalid idempotencyKey: use 1-128 characters of [A-Za-z0-9._:-]."},
	}
	for _, tc := range cases {
		r := c.Call(tc.tool, tc.args)
		errObj, _ := r.D["error"].(map[string]any)
		if !r.IsError || r.Text != tc.text || errObj["code"] != tc.code {
			t.Errorf("%s %v:\n got %q %v (isError %v)\nwant %q code %s", tc.tool, tc.args, r.Text, r.D, r.IsError, tc.text, tc.code)
		}
	}
	// The engine stays usable after all of that.
	if r := c.Exec(map[string]any{"command": "echo still-ok"}); r.Text != "still-ok" {
		t.Fatalf("after bad input: %q", r.Text)
	}
}

// TestNumbersOutOfRangeRejected: numbers outside a field's range are
// clamped with a note where OpenClaw clamps them, and refused naming the
// field where they overflow or are not numbers; the edges are accepted.
func TestNumbersOutOfRangeRejected(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	for _, args := range []map[string]any{
		{"command": "echo a", "yieldMs": 0},
		{"command": "echo a", "yieldMs": 120000},
		{"command": "echo a", "timeout": 0},
		{"command": "echo a", "timeout": 0.5},
	} {
		if r := c.Exec(args); r.IsError {
			t.Errorf("%v: %q", args, r.Text)
		}
	}
	// What OpenClaw clamps is clamped, and the result says so.
	for _, args := range []map[string]any{
		{"command": "echo a", "yieldMs": -5},
		{"command": "echo a", "timeout": -1},
	} {
		r := c.Exec(args)
		if r.IsError || !strings.Contains(r.Text, "is outside") || len(r.D["warnings"].([]any)) == 0 {
			t.Errorf("%v: %q %v", args, r.Text, r.D)
		}
	}
	for _, tc := range []struct {
		args  map[string]any
		field string
	}{
		{map[string]any{"command": "echo a", "yieldMs": 1e300}, "yieldMs"},
		{map[string]any{"command": "echo a", "yieldMs": "NaN"}, "yieldMs"},
		{map[string]any{"command": "echo a", "timeout": 1e300}, "timeout"},
		{map[string]any{"command": "echo a", "timeoutSeconds": 1e300}, "timeoutSeconds"},
	} {
		r := c.Exec(tc.args)
		if !r.IsError || !strings.HasPrefix(r.Text, `Invalid parameter "`+tc.field+`": expected`) {
			t.Errorf("%v: %q", tc.args, r.Text)
		}
	}
	// yieldMs 0 means 10 ms: a sleep is backgrounded at once.
	r := c.Exec(map[string]any{"command": "sleep 908.1", "yieldMs": 0})
	if r.Str("status") != "running" {
		t.Fatalf("yieldMs 0: %q", r.Text)
	}
	id := r.Str("sessionId")
	for _, args := range []map[string]any{
		{"action": "log", "sessionId": id, "offset": 0, "limit": 0},
		{"action": "poll", "sessionId": id, "timeout": 0},
		{"action": "poll", "sessionId": id, "since": 0},
	} {
		if p := c.Process(args); p.IsError {
			t.Errorf("%v: %q", args, p.Text)
		}
	}
	for _, args := range []map[string]any{
		{"action": "log", "sessionId": id, "offset": -3},
		{"action": "log", "sessionId": id, "limit": -1},
		{"action": "log", "sessionId": id, "limit": 2.5},
		{"action": "poll", "sessionId": id, "timeout": -10},
		{"action": "poll", "sessionId": id, "timeout": 120001},
		{"action": "poll", "sessionId": id, "since": -1},
	} {
		if p := c.Process(args); p.IsError || !strings.Contains(p.Text, "\n\nNote: ") {
			t.Errorf("%v: %q, want a clamped value and its note", args, p.Text)
		}
	}
	// A numeric string is a timeout, as in OpenClaw.
	if p := c.Process(map[string]any{"action": "poll", "sessionId": id, "timeout": "50"}); p.IsError {
		t.Errorf("poll timeout \"50\": %q", p.Text)
	}
	for _, tc := range []struct {
		args  map[string]any
		field string
	}{
		{map[string]any{"action": "log", "sessionId": id, "offset": 1e18}, "offset"},
		// process takes JSON numbers only but for timeout (exec also
		// numeric strings).
		{map[string]any{"action": "wait", "sessionId": id, "timeout": "30s"}, "timeout"},
		{map[string]any{"action": "log", "sessionId": id, "limit": "5"}, "limit"},
	} {
		p := c.Process(tc.args)
		if !p.IsError || !strings.HasPrefix(p.Text, `Invalid parameter "`+tc.field+`": expected`) {
			t.Errorf("%v: %q", tc.args, p.Text)
		}
	}
	c.Process(map[string]any{"action": "kill", "sessionId": id})
}

func TestForeignSessionLooksMissing(t *testing.T) {
	home := e2etest.NewHome(t, "")
	a := e2etest.StartConch(t, home, "--agent", "alice")
	r := a.Exec(map[string]any{"command": "sleep 909.1", "background": true})
	id := r.Str("sessionId")
	a.Close()
	b := e2etest.StartConch(t, home, "--agent", "bob")
	for _, action := range []string{"poll", "log", "kill", "write", "remove"} {
		p := b.Process(map[string]any{"action": action, "sessionId": id})
		if p.Text != "No session found for "+id {
			t.Errorf("%s on a foreign session: %q", action, p.Text)
		}
	}
	if l := b.Process(map[string]any{"action": "list"}); l.Text != "No running or recent sessions." {
		t.Errorf("bob lists alice's session: %q", l.Text)
	}
	b.Close()
	a = e2etest.StartConch(t, home, "--agent", "alice")
	if k := a.Process(map[string]any{"action": "kill", "sessionId": id}); k.Text != "Killed session "+id+"." {
		t.Fatalf("alice kill: %q", k.Text)
	}
}

func TestBinaryAndInvalidUTF8(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	// Random bytes, minus ESC and 0xC2 (the lead byte of the C1 controls
	// U+0080-U+009F): with them, the data could end inside an escape
	// sequence that rightly swallows the "end" line (CSI ... \n e: 'e' is
	// its final byte). Same length, still binary and invalid UTF-8.
	r := c.Exec(map[string]any{"command": "head -c 1048576 /dev/urandom | tr '\\033\\302' xx; printf '\\nend\\377\\n'"})
	if r.Str("status") != "completed" {
		t.Fatalf("binary: %v", r.D)
	}
	if !utf8.ValidString(r.Text) {
		t.Fatal("result text is not valid UTF-8")
	}
	if !strings.HasSuffix(r.Text, "end\uFFFD") {
		t.Fatalf("tail of binary output: %q", r.Text[len(r.Text)-20:])
	}
	if r.Num("outputBytes") != 1048576+6 {
		t.Fatalf("outputBytes = %v", r.D["outputBytes"])
	}
}

func TestLargeOutputTruncatedAndRetained(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"tools":{"exec":{"journalMaxBytes":2097152,"journalHeadBytes":262144}}}`))
	// 20 MB of numbered lines; the journal keeps 2 MiB (head + tail).
	r := c.Exec(map[string]any{"command": "seq 1 2500000", "timeout": 60})
	if r.Str("status") != "completed" || r.D["truncated"] != true {
		t.Fatalf("big: %v", r.D)
	}
	if n := utf8.RuneCountInString(r.Text); n > 201000 {
		t.Fatalf("text has %d chars", n)
	}
	// The output ends the text, then what the journal cap dropped for
	// good; the marker does not promise the full output.
	if !strings.HasPrefix(r.Text, "1\n2\n3\n") || !strings.Contains(r.Text, "2499999\n2500000\n\n(Warning: ") || !strings.HasSuffix(r.Text, " bytes of output were dropped by the journal cap (journalMaxBytes) and are gone for good.)") {
		t.Fatalf("head/tail wrong: %q … %q", r.Text[:20], r.Text[len(r.Text)-200:])
	}
	if !strings.Contains(r.Text, " bytes of it were dropped for good by the journal cap; what was kept: process log sessionId="+r.Str("sessionId")+" since=") || r.Num("droppedBytes") <= 0 {
		t.Fatalf("no omission marker")
	}
	id := r.Str("sessionId")
	l := c.Process(map[string]any{"action": "log", "sessionId": id, "limit": 3})
	// log reports the loss as exec did: the lines, then the same warning.
	if !strings.HasPrefix(l.Text, "2499998\n2499999\n2500000\n\n(Warning: ") || !strings.HasSuffix(l.Text, " bytes of output were dropped by the journal cap (journalMaxBytes) and are gone for good.)") ||
		l.Num("droppedLines") <= 0 || l.D["truncated"] != true {
		t.Fatalf("log tail: %q %v", l.Text, l.D)
	}
	if ls := c.Process(map[string]any{"action": "list"}); !strings.Contains(ls.Text, id+" completed") {
		t.Fatalf("retained session not listed: %q", ls.Text)
	}
	// Paging from the start (each page within the output budget) reaches
	// the gap's marker.
	since, found := 0.0, false
	for page := 0; page < 100 && !found; page++ {
		l := c.Process(map[string]any{"action": "log", "sessionId": id, "since": since})
		found = strings.Contains(l.Text, " lines) dropped …]")
		if !strings.Contains(l.Text, "[page ends at the output budget (16000 chars); next page: process log sessionId="+id+" since=") {
			break
		}
		since = l.Num("cursor")
	}
	if !found {
		t.Fatalf("log across the gap lacks the dropped marker")
	}
}

func TestPollCapAndHint(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "seq 1 30000; sleep 910.1", "yieldMs": 500})
	id := r.Str("sessionId")
	// All of seq's output is in before the poll (the yield may end
	// first on a loaded machine); log does not move the poll's cursor.
	e2etest.Eventually(t, 10*time.Second, func() string {
		if l := c.Process(map[string]any{"action": "log", "sessionId": id, "offset": 29999}); !strings.HasPrefix(l.Text, "30000") {
			return "seq has not finished: " + l.Text
		}
		return ""
	})
	p := c.Process(map[string]any{"action": "poll", "sessionId": id})
	if !strings.HasPrefix(p.Text, "[… ") || !strings.Contains(p.Text, " earlier chars skipped; use process log since=0 to read them …]") || !strings.Contains(p.Text, "\n30000\n\nProcess still running.") {
		t.Fatalf("poll cap: %q", p.Text[:200])
	}
	l := c.Process(map[string]any{"action": "log", "sessionId": id})
	if !strings.HasSuffix(l.Text, "\n\n[showing last 200 of 30000 lines; pass offset/limit to page]") || !strings.HasPrefix(l.Text, "29801\n") {
		t.Fatalf("log default: %q", l.Text[:40])
	}
	since := l.Num("cursor")
	again := c.Process(map[string]any{"action": "log", "sessionId": id, "since": since})
	if again.Text != "(no output yet)" {
		t.Fatalf("log since end: %q", again.Text)
	}
	c.Process(map[string]any{"action": "kill", "sessionId": id})
}

func TestManyBackgroundSessions(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	const n = 200
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := c.Exec(map[string]any{"command": fmt.Sprintf("for j in 1 2 3 4 5 6 7 8 9 10; do echo s%d-$j; sleep 0.1; done", i), "background": true})
			if r.Str("status") != "running" {
				errs <- r.Text
				return
			}
			ids[i] = r.Str("sessionId")
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	for i, id := range ids {
		c.WaitEnd(id, 30*time.Second)
		l := c.Process(map[string]any{"action": "log", "sessionId": id})
		var want []string
		for j := 1; j <= 10; j++ {
			want = append(want, fmt.Sprintf("s%d-%d", i, j))
		}
		if l.Text != strings.Join(want, "\n") {
			t.Fatalf("session %d: %q", i, l.Text)
		}
	}
}

func TestCancelledCallKillsRun(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err := c.CS.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "sleep 911.1"}})
	if err == nil {
		t.Fatal("call was not cancelled")
	}
	e2etest.Eventually(t, 6*time.Second, func() string {
		if p := e2etest.Pgrep("sleep 911.1"); len(p) != 0 {
			return fmt.Sprintf("cancelled run still alive: %v", p)
		}
		return ""
	})
}

func TestExitNoticeInline(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	// The engine queues the inline notice, then pushes the same notice
	// as a log message: once the message is here, the next result
	// carries the notice.
	ctx, cancel := context.WithTimeout(context.Background(), e2etest.Slow(10*time.Second))
	defer cancel()
	if err := c.CS.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	r := c.Exec(map[string]any{"command": "sleep 0.3; echo bg-done; exit 4", "background": true})
	id := r.Str("sessionId")
	e2etest.Eventually(t, 10*time.Second, func() string {
		c.Mu.Lock()
		defer c.Mu.Unlock()
		for _, l := range c.Logs {
			if d, _ := l.Data.(map[string]any); d["sessionId"] == id {
				return ""
			}
		}
		return "no exit notice for " + id
	})
	next := c.RawCall("exec", map[string]any{"command": "echo next"})
	want := "[conch event] Exec failed (" + id + ", code 4) :: bg-done\n\nnext"
	if next.Text != want {
		t.Fatalf("inline notice:\n got %q\nwant %q", next.Text, want)
	}
	if again := c.RawCall("exec", map[string]any{"command": "echo again"}); again.Text != "again" {
		t.Fatalf("notice delivered twice: %q", again.Text)
	}
}
