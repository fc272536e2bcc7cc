package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/base/guard"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/session/shim/entry"
)

// The test binary doubles as the supervisor.
func TestMain(m *testing.M) {
	if code, ok := entry.Main(os.Args[1:]); ok { // conch-shim's entry points
		os.Exit(code)
	}
	code := m.Run()
	if fuzzEng != nil {
		fuzzCS.Close()
		fuzzEng.Close()
	}
	for _, d := range fuzzDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// connect serves eng over in-memory MCP transports and returns a client
// session.
func connect(t testing.TB, eng Engine) *mcp.ClientSession {
	t.Helper()
	srv := New(eng, Options{Agent: "main", Version: "test"})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close() })
	return cs
}

// panicky is a fake engine whose Call panics for process calls: the only
// way to make a handler panic once the real engine's panics are fixed.
// It exists in this test only.
type panicky struct{ Engine }

func (p panicky) Call(ctx context.Context, agent, tool string, args json.RawMessage) apitype.Result {
	if tool == "process" {
		panic("boom")
	}
	return p.Engine.Call(ctx, agent, tool, args)
}

func TestHandlerPanicIsAnErrorForThatCall(t *testing.T) {
	eng, _ := fuzzEngine(t)
	cs := connect(t, panicky{eng})
	before := guard.Get("mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "process", Arguments: map[string]any{"action": "list"}})
	if err != nil {
		t.Fatalf("a panicking call must answer, not fail the session: %v", err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError || !strings.Contains(text, "internal error in mcp handler: boom") {
		t.Fatalf("got %v %q", res.IsError, text)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), `"code":"internal"`) {
		t.Fatalf("details %s", b)
	}
	if got := guard.Get("mcp"); got != before+1 {
		t.Fatalf("panic counter %d, want %d", got, before+1)
	}
	// The server keeps serving, on the same session.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo x"}})
	if err != nil || res == nil {
		t.Fatalf("after the panic: %v", err)
	}
}

// fuzzEngine is a real engine on a temporary home that runs nothing
// the caller sends: it first runs one fixture command (a finished
// background session with three lines, whose id it returns, so process
// actions reach the engine's reads), then reloads a configuration with
// the gateway host at security=deny. Every exec then passes the full
// validation and the policy gate and is refused; a call cannot loosen
// the mode (a call may only tighten), sandboxing and elevated mode are
// off, host=node has no nodes, and apply_patch is confined to a temporary
// workspace.
func fuzzEngine(t testing.TB) (*engine.Engine, string) {
	t.Helper()
	ws, home := t.TempDir(), t.TempDir()
	conf := func(security string) *config.Config {
		b := []byte(`{
			"tools": {"exec": {"host": "gateway", "security": "` + security + `", "ask": "off",
				"applyPatch": {"enabled": true, "workspaceOnly": true}},
				"elevated": {"enabled": false}}
		}`)
		if err := os.WriteFile(filepath.Join(home, "config.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	e, err := engine.New(engine.Options{Home: home, Config: conf("full"), Workdir: ws, SupervisorArgv: []string{os.Args[0], "supervise"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	r := e.Call(ctx, "main", "exec", json.RawMessage(`{"command":"printf 'a\\nb\\nc\\n'","background":true}`))
	d, ok := r.Details.(*apitype.ExecDetails)
	if !ok || d.SessionID == "" {
		t.Fatalf("fixture: %q", r.Text)
	}
	e.Call(ctx, "main", "process", json.RawMessage(`{"action":"wait","sessionId":"`+d.SessionID+`","timeout":30000}`))
	conf("deny")
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	if r := e.Call(ctx, "main", "exec", json.RawMessage(`{"command":"true"}`)); !r.IsError() {
		t.Fatalf("security=deny still runs: %q", r.Text)
	}
	return e, d.SessionID
}

var (
	fuzzOnce sync.Once
	fuzzCS   *mcp.ClientSession
	fuzzEng  *engine.Engine
	fuzzSID  string   // the fixture session
	fuzzBase int64    // the panic counter before the first input
	fuzzDirs []string // removed by TestMain
)

// FuzzToolCall sends arbitrary JSON arguments for exec, process and
// apply_patch through the MCP adapter into a live engine and requires an
// answer (a result, or a JSON-RPC error for arguments that are not an
// object) without a panic and without a process running afterwards.
//
//	go test ./internal/adapter/mcpserver -run '^$' -fuzz FuzzToolCall -fuzztime 5m
func FuzzToolCall(f *testing.F) {
	for _, s := range []struct {
		tool byte
		args string
	}{
		{1, `{"action":"log","sessionId":"S","limit":5e18}`},
		{1, `{"action":"log","sessionId":"S","offset":1e19,"limit":1}`},
		{1, `{"action":"poll","sessionId":"S","since":1e300}`},
		{1, `{"action":"poll","sessionId":"S","timeout":"1e999"}`},
		{1, `{"action":"wait","sessionId":"S","until":["port","idle"],"port":65536,"idleMs":1.5}`},
		{1, `{"action":"send-keys","sessionId":"S","keys":["C-c"],"delayMs":-0}`},
		{1, `{"action":"search","sessionId":"S","pattern":"(","context":21,"max":0}`},
		{1, `{"action":"list"}`},
		{1, `{"action":"LIST"}`},
		{0, `{"command":"echo hi","yieldMs":1e300,"timeout":-1}`},
		{0, `{"command":"true","env":{"A":"x\u0000y"}}`},
		{0, `{"command":"true","timeout":2,"timeoutSeconds":3}`},
		{0, `{"command":"rm -rf /","background":true,"security":"full","elevated":true}`},
		{0, `{"command":"true","host":"node","node":"nope"}`},
		{0, `{"command":"","workdir":"\u0000"}`},
		{2, "{\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hi\\n*** End Patch\"}"},
		{2, "{\"input\":\"*** Begin Patch\\n*** Add File: ../../etc/x\\n+hi\\n*** End Patch\"}"},
		{2, `{"input":5}`},
		{0, `[]`}, {1, `null`}, {2, `"x"`}, {0, `{"command":{}}`}, {1, `{`},
	} {
		f.Add(s.tool, []byte(s.args))
	}
	f.Fuzz(func(t *testing.T, which byte, args []byte) {
		fuzzOnce.Do(func() {
			// One engine and session for the whole run: a real home
			// (supervisors, journals) is too slow to build per input.
			ft := &onceTB{TB: t}
			fuzzEng, fuzzSID = fuzzEngine(ft)
			fuzzCS = connect(ft, fuzzEng)
			fuzzBase = guard.Get("mcp")
		})
		tool := []string{"exec", "process", "apply_patch"}[int(which)%3]
		var a any
		if json.Unmarshal(args, &a) != nil {
			a = string(args) // not JSON: send it as a string argument
		}
		// A process call names the fixture session unless it names
		// something longer than one character.
		if m, ok := a.(map[string]any); ok && tool == "process" {
			if id, _ := m["sessionId"].(string); len(id) <= 1 {
				m["sessionId"] = fuzzSID
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := fuzzCS.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: a})
		if ctx.Err() != nil {
			t.Fatalf("%s %s: no answer within 60s", tool, args)
		}
		if err == nil && res == nil {
			t.Fatalf("%s %s: no result and no error", tool, args)
		}
		if err == nil && res.IsError {
			b, _ := json.Marshal(res.StructuredContent)
			if strings.Contains(string(b), `"code":"internal"`) {
				t.Fatalf("%s %s: internal error %s", tool, args, b)
			}
		}
		if n := guard.Get("mcp"); n != fuzzBase {
			t.Fatalf("%s %s: a handler panicked", tool, args)
		}
		// Nothing ran: security=deny leaves no running session.
		r := fuzzEng.Call(context.Background(), "main", "process", json.RawMessage(`{"action":"list"}`))
		if d, ok := r.Details.(*apitype.ListDetails); ok {
			for _, s := range d.Sessions {
				if s.State == "running" {
					t.Fatalf("%s %s: session %s is running under security=deny", tool, args, s.SessionID)
				}
			}
		}
	})
}

// onceTB lets the shared fuzz engine outlive the first input: TestMain
// closes it and removes its directories.
type onceTB struct{ testing.TB }

func (o *onceTB) Cleanup(func()) {}
func (o *onceTB) TempDir() string {
	d, err := os.MkdirTemp("", "conch-fuzz-")
	if err != nil {
		o.TB.Fatal(err)
	}
	fuzzDirs = append(fuzzDirs, d)
	return filepath.Clean(d)
}

// TestSchemaRangesMatch: every numeric property of the input schemas
// states the range apitype enforces, and "integer" where it needs one.
func TestSchemaRangesMatch(t *testing.T) {
	for _, c := range []struct {
		schema string
		ranges []apitype.Range
	}{{execSchema, apitype.Ranges(apitype.ExecParams{})}, {processSchema, apitype.Ranges(apitype.ProcessParams{})}} {
		var s struct {
			Properties map[string]struct {
				Type        any      `json:"type"`
				Minimum     *float64 `json:"minimum"`
				Maximum     *float64 `json:"maximum"`
				Description string   `json:"description"`
			} `json:"properties"`
		}
		if err := json.Unmarshal([]byte(c.schema), &s); err != nil {
			t.Fatal(err)
		}
		for _, r := range c.ranges {
			p, ok := s.Properties[r.Field]
			if ok && r.Clamp {
				// A clamped number is accepted outside its range, and a
				// fraction where an integer is needed is floored: the
				// schema must not refuse either.
				if p.Minimum != nil || p.Maximum != nil || p.Type != "number" {
					t.Errorf("schema of %s (clamped): %+v, want a number without minimum or maximum", r.Field, p)
				}
				if !strings.Contains(p.Description, "clamp") && !strings.Contains(p.Description, "floored") {
					t.Errorf("schema of %s (clamped): the description does not say it clamps: %q", r.Field, p.Description)
				}
				continue
			}
			if !ok || p.Minimum == nil || p.Maximum == nil || *p.Minimum != r.Min || *p.Maximum != r.Max {
				t.Errorf("schema of %s: %+v, want [%v, %v]", r.Field, p, r.Min, r.Max)
				continue
			}
			if r.Int && p.Type != "integer" {
				t.Errorf("schema of %s: type %v, want integer", r.Field, p.Type)
			}
		}
	}
}

// TestExecHostEnumMatchesConfig: exec's host enum lists the host names
// config accepts (which internal/host checks against its registry).
func TestExecHostEnumMatchesConfig(t *testing.T) {
	var s struct {
		Properties map[string]struct {
			Enum []string `json:"enum"`
		} `json:"properties"`
	}
	if err := json.Unmarshal([]byte(execSchema), &s); err != nil {
		t.Fatal(err)
	}
	got, want := s.Properties["host"].Enum, config.HostValues()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("exec's host enum %v, config.HostValues %v", got, want)
	}
}
