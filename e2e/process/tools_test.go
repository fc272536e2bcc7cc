package process

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolsListBudget is the most tools/list may cost a model, in tokens
// estimated as bench/agent.sh does (approxTokens).
const toolsListBudget = 2500

// approxTokens is the token estimate of bench/agent.sh (agentbench):
// Unicode characters / 4.
func approxTokens(s string) int { return utf8.RuneCountInString(s) / 4 }

// TestToolsListForModels checks what a model reads in tools/list and
// initialize, through the real binary and the Go SDK client: the size
// budget, units, one line per process action, the two meanings of host,
// annotations, output schemas and the server instructions.
func TestToolsListForModels(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"tools":{"exec":{"applyPatch":{"enabled":true}}}}`))
	ctx := t.Context()
	res, err := c.CS.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 3 {
		t.Fatalf("want exec, process and apply_patch (the largest list), got %d tools", len(res.Tools))
	}
	b, _ := json.Marshal(res)
	if n := approxTokens(string(b)); n > toolsListBudget {
		t.Errorf("tools/list is ~%d tokens (%d chars), over the budget of %d", n, utf8.RuneCount(b), toolsListBudget)
	} else {
		t.Logf("tools/list: %d chars, ~%d tokens (budget %d)", utf8.RuneCount(b), n, toolsListBudget)
	}
	tools := map[string]*mcp.Tool{}
	props := map[string]map[string]map[string]any{}
	for _, tl := range res.Tools {
		tools[tl.Name] = tl
		var s struct {
			Properties map[string]map[string]any `json:"properties"`
		}
		sb, _ := json.Marshal(tl.InputSchema)
		json.Unmarshal(sb, &s)
		props[tl.Name] = s.Properties
		a := tl.Annotations
		if a == nil || a.Title == "" || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: annotations incomplete: %+v", tl.Name, a)
			continue
		}
		if a.ReadOnlyHint || !*a.DestructiveHint {
			t.Errorf("%s: every tool here can destroy (run rm, kill, delete files): %+v", tl.Name, a)
		}
	}
	if !*tools["exec"].Annotations.OpenWorldHint || *tools["apply_patch"].Annotations.OpenWorldHint {
		t.Errorf("openWorldHint: exec reaches anything, apply_patch only the workspace")
	}

	// Every number with a time unit says it, every time; numbers are
	// numbers (no string alternative).
	word := map[string]string{"ms": "millisecond", "s": "second"}
	for tool, v := range map[string]any{"exec": apitype.ExecParams{}, "process": apitype.ProcessParams{}} {
		rs := apitype.Ranges(v)
		if tool == "exec" {
			ts := rs[len(rs)-1]
			for _, r := range rs {
				if r.Field == "timeout" {
					ts = r
				}
			}
			ts.Field = "timeoutSeconds"
			rs = append(rs, ts)
		}
		for _, r := range rs {
			p := props[tool][r.Field]
			if p == nil {
				t.Errorf("%s.%s: not in the input schema", tool, r.Field)
				continue
			}
			if typ := p["type"]; typ != "number" && typ != "integer" {
				t.Errorf("%s.%s: type %v, want number or integer only", tool, r.Field, typ)
			}
			desc, _ := p["description"].(string)
			if w := word[r.Unit]; w != "" && !strings.Contains(strings.ToLower(desc), w) {
				t.Errorf("%s.%s: unit %s not stated in %q", tool, r.Field, r.Unit, desc)
			}
		}
	}
	if d := props["exec"]["timeout"]["description"].(string); !strings.Contains(d, "SECONDS (not ms)") {
		t.Errorf("exec timeout: %q", d)
	}
	if d := props["process"]["timeout"]["description"].(string); !strings.Contains(d, "MILLISECONDS (not seconds") {
		t.Errorf("process timeout: %q", d)
	}

	// One line per process action, in the enum's order.
	act := props["process"]["action"]
	lines := strings.Split(act["description"].(string), "\n")
	enum, _ := act["enum"].([]any)
	if len(lines) != len(apitype.ProcessActions) || len(enum) != len(apitype.ProcessActions) {
		t.Fatalf("action: %d lines, %d enum values, %d actions", len(lines), len(enum), len(apitype.ProcessActions))
	}
	for i, a := range apitype.ProcessActions {
		if enum[i] != a || !strings.HasPrefix(lines[i], a+": ") || len(lines[i]) < len(a)+10 {
			t.Errorf("action %s: enum %v, line %q", a, enum[i], lines[i])
		}
	}

	// host: where a command runs (exec) vs the host a port wait connects
	// to (process); each description says which.
	eh, _ := props["exec"]["host"]["description"].(string)
	ph, _ := props["process"]["host"]["description"].(string)
	if !strings.Contains(eh, "Where the command runs") || !strings.Contains(ph, "until=port") || !strings.Contains(ph, "Not where commands run") {
		t.Errorf("host descriptions: exec %q, process %q", eh, ph)
	}

	// The output schemas name the fields a model acts on.
	for tool, want := range map[string][]string{
		"exec":        {"status", "sessionId", "exitCode", "cursor", "error"},
		"process":     {"status", "sessionId", "exitCode", "cursor", "outcome", "fired", "match", "error"},
		"apply_patch": {"status", "error"},
	} {
		var s struct {
			Required   []string                  `json:"required"`
			Properties map[string]map[string]any `json:"properties"`
		}
		sb, _ := json.Marshal(tools[tool].OutputSchema)
		json.Unmarshal(sb, &s)
		for _, f := range want {
			if s.Properties[f] == nil {
				t.Errorf("%s outputSchema lacks %s: %s", tool, f, sb)
			}
		}
		if !reflect.DeepEqual(s.Required, []string{"status"}) {
			t.Errorf("%s outputSchema requires %v", tool, s.Required)
		}
	}

	ir := c.CS.InitializeResult()
	if ir == nil || ir.Instructions == "" {
		t.Fatal("no server instructions")
	}
	for _, w := range []string{"background=true", "process wait", "since", "sleep", "seconds", "milliseconds"} {
		if !strings.Contains(ir.Instructions, w) {
			t.Errorf("instructions lack %q:\n%s", w, ir.Instructions)
		}
	}
	if n := approxTokens(ir.Instructions); n > 200 {
		t.Errorf("instructions are ~%d tokens; keep them short", n)
	}
}

// TestProcessNumbersOnly: a string where process wants a number is
// invalid_argument stating the range and the unit; timeout takes a
// numeric string, as in OpenClaw (and exec's numbers do).
func TestProcessNumbersOnly(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "sleep 917.3", "background": true, "timeout": "60"})
	if r.IsError {
		t.Fatalf("exec timeout \"60\": %q", r.Text)
	}
	id := r.Str("sessionId")
	defer c.Process(map[string]any{"action": "kill", "sessionId": id})
	if p := c.Process(map[string]any{"action": "poll", "sessionId": id, "timeout": "50"}); p.IsError {
		t.Errorf("poll timeout \"50\": %q", p.Text)
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"action": "wait", "timeout": "30s"}, `Invalid parameter "timeout": expected a number in [0, 600000] (milliseconds), or a numeric string such as "600000" (got "30s").`},
		{map[string]any{"action": "wait", "until": "idle", "idleMs": "500"}, `Invalid parameter "idleMs": expected a JSON number in [100, 3600000] (milliseconds), not a string (got "500").`},
	} {
		tc.args["sessionId"] = id
		p := c.Process(tc.args)
		if !p.IsError || p.Text != tc.want {
			t.Errorf("%v: %q\nwant %q", tc.args, p.Text, tc.want)
		}
		if e, _ := p.D["error"].(map[string]any); e["code"] != "invalid_argument" {
			t.Errorf("%v: %v", tc.args, p.D)
		}
	}
}

// TestWaitReturnsNewOutput: every condition's result carries the output
// new since the caller's cursor (since, else its last read), bounded like
// poll, and moves the read position on so poll does not repeat it.
func TestWaitReturnsNewOutput(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"tools":{"exec":{"pendingMaxOutputChars":1000}}}`))
	// A script that announces each step before making it true, and takes
	// the next step when the test says so (a file in its directory).
	dir := t.TempDir()
	next := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := c.Exec(map[string]any{"workdir": dir, "background": true, "command": "echo step-one; until [ -e go2 ]; do sleep 0.05; done; " +
		"echo step-two; touch made.txt; until [ -e go3 ]; do sleep 0.05; done; echo step-three; sleep 917.4"})
	id := r.Str("sessionId")
	defer c.Process(map[string]any{"action": "kill", "sessionId": id})

	w := c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "regex", "pattern": "step-one", "timeout": 20000})
	if w.Str("fired") != "regex" || !strings.HasPrefix(w.Text, "step-one\n\nCondition met: regex /step-one/") {
		t.Fatalf("regex: %q", w.Text)
	}
	next("go2")
	w = c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "file", "path": "made.txt", "timeout": 20000})
	if w.Str("fired") != "file" || !strings.HasPrefix(w.Text, "step-two\n\nCondition met: file made.txt") {
		t.Fatalf("file: %q (the output after the last read, without step-one)", w.Text)
	}
	next("go3")
	w = c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "idle", "idleMs": 300, "timeout": 20000})
	if w.Str("fired") != "idle" || !strings.HasPrefix(w.Text, "step-three\n\nCondition met: idle 300 ms") {
		t.Fatalf("idle: %q", w.Text)
	}
	// Read: poll shows nothing new; since=0 shows all again.
	if p := c.Process(map[string]any{"action": "poll", "sessionId": id}); !strings.HasPrefix(p.Text, "(no new output)") {
		t.Fatalf("poll after waits repeats their output: %q", p.Text)
	}
	w = c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "idle", "idleMs": 100, "since": 0, "timeout": 20000})
	if !strings.HasPrefix(w.Text, "step-one\nstep-two\nstep-three\n\nCondition met: idle 100 ms") || w.Num("since") != 0 || w.Num("cursor") != 29 {
		t.Fatalf("since 0: %q %v", w.Text, w.D)
	}
	// Nothing new: the text is the outcome alone.
	w = c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "regex", "pattern": "never", "timeout": 200})
	if w.Text != "Timed out after 200 ms waiting for regex /never/; process still running." {
		t.Fatalf("timeout without new output: %q", w.Text)
	}

	// exit and exited, bounded like poll (the newest 1000 chars here).
	r = c.Exec(map[string]any{"command": "sleep 0.2; seq 1 5000; echo final-line; exit 3", "background": true})
	w = c.Process(map[string]any{"action": "wait", "sessionId": r.Str("sessionId"), "timeout": 20000})
	if w.Str("fired") != "exit" || !strings.HasSuffix(w.Text, "\nfinal-line\n\nProcess exited with code 3.") ||
		!strings.HasPrefix(w.Text, "[… ") || !strings.Contains(w.Text, "use process log since=0 to read them") || w.Num("skippedChars") <= 0 {
		t.Fatalf("exit: %q", w.Text)
	}
	if n := utf8.RuneCountInString(w.Text); n > 1200 {
		t.Fatalf("exit output not bounded: %d chars", n)
	}
	r = c.Exec(map[string]any{"command": "sleep 0.2; echo last-words; exit 4", "background": true})
	w = c.Process(map[string]any{"action": "wait", "sessionId": r.Str("sessionId"), "until": "regex", "pattern": "never", "timeout": 20000})
	if w.Str("outcome") != "exited" || w.Text != "last-words\n\nProcess exited with code 4 before the condition was met." {
		t.Fatalf("exited: %q", w.Text)
	}
}

// TestWaitServerOutput: port and http waits return what the server
// printed before it was up (and, for http, usually its log of the
// probe's request).
func TestWaitServerOutput(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	server := func(what string) (string, int) {
		port := e2etest.FreePort(t)
		r := c.Exec(map[string]any{"command": fmt.Sprintf("echo %s-server-starting; sleep 0.3; exec python3 -u -m http.server %d --bind 127.0.0.1", what, port), "background": true})
		t.Cleanup(func() { c.Process(map[string]any{"action": "kill", "sessionId": r.Str("sessionId")}) })
		return r.Str("sessionId"), port
	}
	id, port := server("port")
	w := c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "port", "port": port, "timeout": 20000})
	if w.Str("fired") != "port" || !strings.HasPrefix(w.Text, "port-server-starting\n") ||
		!strings.Contains(w.Text, fmt.Sprintf("\n\nCondition met: port 127.0.0.1:%d after ", port)) {
		t.Fatalf("port: %q", w.Text)
	}
	id, port = server("http")
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	w = c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "http", "url": url, "timeout": 20000})
	if w.Str("fired") != "http" || !strings.HasPrefix(w.Text, "http-server-starting\n") || !strings.Contains(w.Text, "\n\nCondition met: http "+url+" after ") {
		t.Fatalf("http: %q", w.Text)
	}
	// The server's log of the probe's request is written before its
	// response, but reaches the journal through the supervisor: the wait
	// lets output settle briefly, which usually (not provably) catches it.
	if !strings.Contains(w.Text, `"GET / HTTP/1.1" 200`) {
		t.Logf("the probe's request log came after the wait result: %q", w.Text)
	}
}
