package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// processFieldActions names the process actions that read each numeric
// field (with the extra arguments they need). A numeric field of
// ProcessParams missing here fails TestNumbersAtEveryAdapter, so a new
// field cannot skip the boundary test.
var processFieldActions = map[string][]map[string]any{
	"delayMs": {{"action": "send-keys", "keys": []string{"a"}}},
	"offset":  {{"action": "log"}},
	"limit":   {{"action": "log"}},
	"since":   {{"action": "poll"}, {"action": "log"}, {"action": "search", "pattern": "x"}},
	"timeout": {{"action": "poll"}, {"action": "wait"}},
	"port":    {{"action": "wait", "until": "port"}},
	"idleMs":  {{"action": "wait", "until": "idle"}},
	"context": {{"action": "search", "pattern": "x"}},
	"max":     {{"action": "search", "pattern": "x"}},
}

func boundaryValues(r apitype.Range) []any {
	return []any{r.Min - 1, r.Min, r.Max, r.Max + 1, float64(1 << 53), math.Pow(2, 63), 5e18, 1e19, 1e300, -1e300,
		1.5, -1, "5", "NaN", "abc", true, nil}
}

func inRangeValue(r apitype.Range, v any) bool {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int:
		f = float64(x)
	case string:
		if x != "5" {
			return false
		}
		f = 5
	case nil:
		return true
	default:
		return false
	}
	if r.Clamp {
		// Clamped into the range (fractions floored), unless it is
		// beyond ±2^53.
		return math.Abs(f) <= apitype.MaxSafe
	}
	return f >= r.Min && f <= r.Max && (!r.Int || f == math.Trunc(f))
}

// TestNumbersAtEveryAdapter sends every boundary value of every numeric
// field of exec and process, through MCP over HTTP and through /v1, to a
// real `conch serve`: each answer is a success (value in range) or
// invalid_argument naming the field (HTTP 400); a clamped field takes
// any number within ±2^53. The gateway is healthy
// afterwards.
func TestNumbersAtEveryAdapter(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	c := g.MCPClient(g.Token)
	r := c.Exec(map[string]any{"command": "echo hi", "background": true})
	id := r.Str("sessionId")
	c.WaitEnd(id, 30*time.Second)

	type call struct {
		tool  string
		args  map[string]any
		rng   apitype.Range
		value any
	}
	var calls []call
	for _, rg := range apitype.Ranges(apitype.ExecParams{}) {
		for _, name := range []string{rg.Field, map[string]string{"timeout": "timeoutSeconds"}[rg.Field]} {
			if name == "" {
				continue
			}
			rr := rg
			rr.Field = name
			for _, v := range boundaryValues(rr) {
				calls = append(calls, call{"exec", map[string]any{"command": "true", name: v}, rr, v})
			}
		}
	}
	for _, rg := range apitype.Ranges(apitype.ProcessParams{}) {
		acts, ok := processFieldActions[rg.Field]
		if !ok {
			t.Errorf("process field %q has no action in processFieldActions", rg.Field)
			continue
		}
		for _, a := range acts {
			rr := rg.For(a["action"].(string))
			for _, v := range boundaryValues(rr) {
				args := map[string]any{"sessionId": id, rg.Field: v}
				for k, x := range a {
					args[k] = x
				}
				calls = append(calls, call{"process", args, rr, v})
			}
		}
	}
	for _, cl := range calls {
		what := fmt.Sprintf("%s %v", cl.tool, cl.args)
		ok := inRangeValue(cl.rng, cl.value)
		if _, str := cl.value.(string); str && cl.tool == "process" && !cl.rng.Str {
			ok = false // process takes JSON numbers only, but for timeout
		}
		// MCP over HTTP.
		mr := c.Call(cl.tool, cl.args)
		code, _ := mr.D["error"].(map[string]any)
		rejected := mr.IsError && code["code"] == "invalid_argument" && strings.Contains(mr.Text, `"`+cl.rng.Field+`"`)
		if ok && rejected {
			t.Errorf("mcp %s: in range, rejected: %s", what, mr.Text)
		}
		if !ok && !rejected {
			t.Errorf("mcp %s: want invalid_argument naming %q, got %q %v", what, cl.rng.Field, mr.Text, mr.D)
		}
		// /v1.
		st, m := g.Do("POST", "/v1/"+cl.tool, g.Token, cl.args, nil)
		e, _ := m["error"].(map[string]any)
		msg, _ := e["message"].(string)
		rejected = st == 400 && e["code"] == "invalid_argument" && strings.Contains(msg, `"`+cl.rng.Field+`"`)
		if ok && rejected {
			t.Errorf("/v1 %s: in range, rejected: %s", what, msg)
		}
		if !ok && !rejected {
			t.Errorf("/v1 %s: want 400 invalid_argument naming %q, got %d %v", what, cl.rng.Field, st, m)
		}
	}
	t.Logf("%d calls through each adapter", len(calls))
	if st, _ := g.Do("GET", "/v1/health", "", nil, nil); st != 200 {
		t.Fatalf("health after the calls: %d", st)
	}
}

// TestGatewaySurvivesIssueCases replays the calls that used to kill the
// gateway or misread numbers: log limit 5e18 (a panic), offset 1e19
// (wrapped to every line), poll since 1e300 (re-read everything), and an
// env value with a NUL (spawn failed with 200).
func TestGatewaySurvivesIssueCases(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	c := g.MCPClient(g.Token)
	r := c.Exec(map[string]any{"command": "printf 'a\\nb\\nc\\n'", "background": true})
	id := r.Str("sessionId")
	c.WaitEnd(id, 30*time.Second)
	for _, args := range []map[string]any{
		{"action": "log", "sessionId": id, "limit": 5e18},
		{"action": "log", "sessionId": id, "offset": 1e19, "limit": 1},
		{"action": "poll", "sessionId": id, "since": 1e300},
	} {
		mr := c.Call("process", args)
		if !mr.IsError || !strings.Contains(mr.Text, "Invalid parameter") {
			t.Errorf("mcp %v: %q", args, mr.Text)
		}
		st, m := g.Do("POST", "/v1/process", g.Token, args, nil)
		if st != 400 {
			t.Errorf("/v1 %v: %d %v", args, st, m)
		}
	}
	// The largest cursor is "nothing new"; the largest line counts work.
	if p := c.Process(map[string]any{"action": "poll", "sessionId": id, "since": float64(apitype.MaxSafe)}); p.IsError || !strings.HasPrefix(p.Text, "(no new output)") {
		t.Errorf("poll since MaxSafe: %q", p.Text)
	}
	if l := c.Process(map[string]any{"action": "log", "sessionId": id, "limit": float64(apitype.MaxSafe)}); l.IsError || l.Text != "a\nb\nc" {
		t.Errorf("log limit MaxSafe: %q", l.Text)
	}
	if l := c.Process(map[string]any{"action": "log", "sessionId": id, "offset": float64(apitype.MaxSafe), "limit": float64(apitype.MaxSafe)}); l.IsError || strings.Contains(l.Text, "a") {
		t.Errorf("log offset MaxSafe: %q", l.Text)
	}
	for _, args := range []map[string]any{
		{"command": "true", "env": map[string]any{"A": "x\x00y"}},
		{"command": "true", "env": map[string]any{"A\x00B": "x"}},
		{"command": "echo a\x00b"},
		{"command": "true", "workdir": "/tmp\x00x"},
	} {
		st, m := g.Do("POST", "/v1/exec", g.Token, args, nil)
		e, _ := m["error"].(map[string]any)
		if st != 400 || e["code"] != "invalid_argument" || !strings.Contains(fmt.Sprint(e["message"]), "NUL") {
			t.Errorf("/v1/exec %q: %d %v", args, st, m)
		}
	}
	if r := c.Exec(map[string]any{"command": "echo still-ok"}); r.Text != "still-ok" {
		t.Fatalf("after bad calls: %q", r.Text)
	}
	if n := metric(t, g, `conch_handler_panics_total{adapter="mcp"}`); n != "0" {
		t.Errorf("panics recovered: %s", n)
	}
}

// metric returns the value of one /metrics sample line.
func metric(t *testing.T, g *e2etest.Gateway, name string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", g.Base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+g.Operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	t.Fatalf("metrics lack %s:\n%s", name, b)
	return ""
}

// TestGatewaySoak throws random and malformed calls at a running conch
// serve (bad JSON, wrong types, huge numbers, unknown actions, truncated
// bodies, wrong content types; over /v1 and raw /mcp JSON-RPC), then
// checks it is healthy, recovered no panic, and left no session or
// process behind. Bounded by count (and a deadline).
func TestGatewaySoak(t *testing.T) {
	home := e2etest.NewHome(t, "")
	g := e2etest.StartGateway(t, home)
	c := g.MCPClient(g.Token)
	// A finished session with output, so that numbers reach the
	// engine's reads rather than stopping at "No session found".
	r := c.Exec(map[string]any{"command": "printf 'a\\nb\\n'", "background": true})
	sid := r.Str("sessionId")
	c.WaitEnd(sid, 30*time.Second)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewSource(seed))
	deadline := time.Now().Add(40 * time.Second)

	numbers := []any{0, -1, 1.5, 5e18, 1e19, 1e300, -1e300, float64(1 << 53), "NaN", "1e999", true, nil, "x", []any{1}, map[string]any{}}
	fields := []string{"action", "sessionId", "limit", "offset", "since", "timeout", "yieldMs", "delayMs", "idleMs", "port", "context", "max",
		"command", "env", "keys", "data", "until", "pattern", "background", "pty", "host", "bogus"}
	actions := append([]string{"dance", "", "LOG"}, apitype.ProcessActions...)
	// Commands are harmless: at most a short sleep, never backgrounded
	// for long.
	commands := []any{"true", "echo x", "sleep 0.05", "", 7, nil, "echo \x00", strings.Repeat("y", 5000)}
	randomArgs := func(tool string) map[string]any {
		m := map[string]any{}
		switch tool {
		case "process":
			m["action"] = actions[rnd.Intn(len(actions))]
			if rnd.Intn(2) == 0 { // mostly the reads, which do arithmetic
				m["action"] = []string{"log", "poll", "search"}[rnd.Intn(3)]
			}
			m["sessionId"] = []any{sid, sid, sid, "nope", 5e18, ""}[rnd.Intn(6)]
			if a := m["action"]; m["sessionId"] == sid && (a == "clear" || a == "remove") {
				m["sessionId"] = "nope" // keep the fixture for the reads
			}
		case "exec":
			m["command"] = commands[rnd.Intn(len(commands))]
		case "apply_patch":
			m["input"] = []any{"*** Begin Patch\n*** Add File: soak.txt\n+x\n*** End Patch", "*** Begin Patch\n*** Delete File: /etc/passwd\n*** End Patch", 5e18, ""}[rnd.Intn(4)]
		}
		if rnd.Intn(8) == 0 {
			return m
		}
		ranges := map[string][]apitype.Range{"exec": apitype.Ranges(apitype.ExecParams{}), "process": apitype.Ranges(apitype.ProcessParams{})}[tool]
		for i := rnd.Intn(3); i >= 0; i-- {
			if len(ranges) > 0 && rnd.Intn(3) > 0 {
				// Mostly a number of the tool, at or beyond its edges.
				r := ranges[rnd.Intn(len(ranges))]
				edges := []any{r.Min - 1, r.Max + 1, r.Max, 5e18, 1e19, 1e300, float64(1 << 53), -1, 1.5, "1e999"}
				m[r.Field] = edges[rnd.Intn(len(edges))]
				continue
			}
			f := fields[rnd.Intn(len(fields))]
			switch f {
			case "action":
				m[f] = actions[rnd.Intn(len(actions))]
			case "sessionId":
				m[f] = []any{"nope", 5e18, ""}[rnd.Intn(3)]
			case "command":
				m[f] = commands[rnd.Intn(len(commands))]
			case "env":
				m[f] = map[string]any{"K\x00": "v", "A": numbers[rnd.Intn(len(numbers))]}
			case "keys":
				m[f] = []any{"C-c", 5e18, nil}
			case "background", "pty":
				m[f] = false
			default:
				m[f] = numbers[rnd.Intn(len(numbers))]
			}
		}
		return m
	}
	post := func(path, ctype string, body []byte) {
		req, _ := http.NewRequest("POST", g.Base+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+g.Token)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("POST %s %q: %v (the gateway died?)", path, body, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 && resp.StatusCode != 503 {
			t.Errorf("POST %s %q: %d", path, body, resp.StatusCode)
		}
	}
	n := 0
	for ; n < 10000 && time.Now().Before(deadline); n++ {
		tool := []string{"exec", "process", "apply_patch"}[rnd.Intn(3)]
		args := randomArgs(tool)
		if tool == "exec" && args["background"] == nil {
			args["background"] = false
		}
		body, _ := json.Marshal(args)
		switch rnd.Intn(6) {
		case 0: // /v1, well-formed JSON
			post("/v1/"+tool, "application/json", body)
		case 1: // truncated body
			post("/v1/"+tool, "application/json", body[:rnd.Intn(len(body))])
		case 2: // wrong content type, garbage
			post("/v1/"+tool, "text/plain", []byte{'{', byte(rnd.Intn(256)), '}'})
		case 3: // raw JSON-RPC on /mcp without a session, possibly truncated
			rpc, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
			if rnd.Intn(2) == 0 {
				rpc = rpc[:rnd.Intn(len(rpc))]
			}
			post("/mcp", "application/json", rpc)
		default: // the real MCP client
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := c.CS.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			cancel()
			if err != nil && !strings.Contains(err.Error(), "unknown tool") {
				t.Fatalf("MCP %s %v: %v", tool, args, err)
			}
			if b, _ := json.Marshal(res); err == nil && strings.Contains(string(b), `"code":"internal"`) {
				t.Errorf("MCP %s %v: %s", tool, args, b)
			}
		}
	}
	t.Logf("%d random calls", n)
	if st, _ := g.Do("GET", "/v1/health", "", nil, nil); st != 200 {
		t.Fatalf("health: %d", st)
	}
	for _, a := range []string{"http", "mcp"} {
		if v := metric(t, g, fmt.Sprintf("conch_handler_panics_total{adapter=%q}", a)); v != "0" {
			t.Errorf("%s panics recovered: %s", a, v)
		}
	}
	// No session stays running and no command is left (every random
	// command ends on its own within a second).
	e2etest.Eventually(t, 30*time.Second, func() string {
		l := c.Process(map[string]any{"action": "list"})
		ss, _ := l.D["sessions"].([]any)
		for _, s := range ss {
			if m, _ := s.(map[string]any); m["status"] == "running" {
				return fmt.Sprintf("running session left: %v", m)
			}
		}
		if p := e2etest.PgrepHome("sleep", home); len(p) > 0 {
			return fmt.Sprintf("commands left: %v", p)
		}
		return ""
	})
	// Every retained session can be removed, and then no supervisor of
	// the home is left but the engine's one idle spare (started ahead of
	// the next exec).
	l := c.Process(map[string]any{"action": "list"})
	ss, _ := l.D["sessions"].([]any)
	for _, s := range ss {
		m, _ := s.(map[string]any)
		if r := c.Process(map[string]any{"action": "remove", "sessionId": m["sessionId"]}); r.IsError {
			t.Errorf("remove %v: %q", m["sessionId"], r.Text)
		}
	}
	e2etest.Eventually(t, 30*time.Second, func() string {
		if p := e2etest.PgrepHome("supervise", home); len(p) > 1 {
			return fmt.Sprintf("supervisors left: %v", p)
		}
		return ""
	})
	if r := c.Exec(map[string]any{"command": "echo still-ok"}); r.Text != "still-ok" {
		t.Fatalf("after the soak: %q", r.Text)
	}
}

// TestForwardedSupervisorRequestHasRanges: the supervisor request a node
// host forwards from its gateway declares a range for every number
// (apitype.Ranges panics on a numeric field without one).
func TestForwardedSupervisorRequestHasRanges(t *testing.T) {
	if rs := apitype.Ranges(proto.Request{}); len(rs) < 6 {
		t.Fatalf("ranges: %+v", rs)
	}
}
