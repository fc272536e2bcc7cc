package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// strictDecode decodes raw into v refusing members v has no field for, so
// an answer that carries a member its apitype type lacks fails.
func strictDecode(t *testing.T, what string, raw []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: decode into %T: %v\n%s", what, v, err, raw)
	}
}

// TestClientDecodesEveryAnswer drives a real gateway with the Go client
// and decodes every kind of tool result and operator answer into its
// apitype type, refusing unknown members: a wire type living outside
// apitype (or a member its apitype type lacks) fails here.
func TestClientDecodesEveryAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), e2etest.Slow(60*time.Second))
	defer cancel()
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	c, err := client.New(client.Options{Gateway: g.Base, Token: g.Operator, Agent: "main"})
	if err != nil {
		t.Fatal(err)
	}
	tool := func(what string, res client.Result, err error, v any) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v (%q)", what, err, res.Text)
		}
		strictDecode(t, what, res.Details, v)
	}

	var ex apitype.ExecDetails
	res, err := c.Exec(ctx, map[string]any{"command": "echo one; echo two; exec sleep 60", "pty": true, "yieldMs": 10})
	tool("exec", res, err, &ex)
	if ex.SessionID == "" || ex.Status != "running" {
		t.Fatalf("exec: want a running session: %s", res.Details)
	}
	id := ex.SessionID
	var wd apitype.WaitDetails
	res, err = c.Process(ctx, map[string]any{"action": "wait", "sessionId": id, "until": "regex", "pattern": "two", "timeout": 30})
	tool("wait", res, err, &wd)
	if wd.Outcome != "met" || wd.Match == nil || wd.Match.Text != "two" {
		t.Fatalf("wait: %s", res.Details)
	}
	var sd apitype.SearchDetails
	res, err = c.Process(ctx, map[string]any{"action": "search", "sessionId": id, "pattern": "one|two"})
	tool("search", res, err, &sd)
	if sd.TotalMatches != 2 || len(sd.Matches) != 2 {
		t.Fatalf("search: %s", res.Details)
	}
	var scr apitype.ScreenDetails
	res, err = c.Process(ctx, map[string]any{"action": "screen", "sessionId": id})
	tool("screen", res, err, &scr)
	if scr.Rows == 0 || len(scr.Lines) != scr.Rows {
		t.Fatalf("screen: %s", res.Details)
	}
	var pd apitype.PollDetails
	res, err = c.Process(ctx, map[string]any{"action": "poll", "sessionId": id})
	tool("poll", res, err, &pd)
	var ld apitype.LogDetails
	res, err = c.Log(ctx, id, client.LogOptions{})
	tool("log", res, err, &ld)
	var list apitype.ListDetails
	res, err = c.Process(ctx, map[string]any{"action": "list"})
	tool("list", res, err, &list)
	if len(list.Sessions) != 1 {
		t.Fatalf("list: %s", res.Details)
	}
	var kd apitype.StatusDetails
	res, err = c.Kill(ctx, id)
	tool("kill", res, err, &kd)

	// Operator answers, typed by the client and checked strictly.
	raw := func(method, path string, body any) []byte {
		t.Helper()
		var m json.RawMessage
		if err := c.Call(ctx, method, path, nil, body, &m); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return m
	}
	var h client.Health
	strictDecode(t, "health", raw("GET", "/v1/health", nil), &h)
	if h2, err := c.Health(ctx); err != nil || h2.Disk == nil || h2.Status != "ok" {
		t.Fatalf("health %+v %v", h2, err)
	}
	var d apitype.ExecDefaults
	strictDecode(t, "exec defaults", raw("PUT", "/v1/agents/main/exec-defaults", apitype.ExecDefaults{Host: "gateway"}), &d)
	if d, err := c.ExecDefaults(ctx, "main"); err != nil || d.Host != "gateway" {
		t.Fatalf("exec defaults %+v %v", d, err)
	}
	var doc struct {
		Findings []apitype.Finding `json:"findings"`
	}
	strictDecode(t, "doctor", raw("GET", "/v1/doctor", nil), &doc)
	if f, err := c.Doctor(ctx); err != nil || len(f) == 0 {
		t.Fatalf("doctor %v %v", f, err)
	}
	var sb apitype.SandboxStatus
	strictDecode(t, "sandbox", raw("GET", "/v1/sandbox", nil), &sb)
	if st, err := c.SandboxStatus(ctx); err != nil || len(st.Agents) == 0 {
		t.Fatalf("sandbox %+v %v", st, err)
	}

	// An exec the gate holds for approval.
	gated := e2etest.StartGateway(t, e2etest.GatedHome(t, `,"security":"allowlist","ask":"on-miss"`, ""))
	ac, err := client.New(client.Options{Gateway: gated.Base, Token: gated.Token})
	if err != nil {
		t.Fatal(err)
	}
	var ad apitype.ApprovalDetails
	res, err = ac.Exec(ctx, map[string]any{"command": "true"})
	tool("exec approval", res, err, &ad)
	if ad.Status != "approval-pending" || ad.ApprovalID == "" || len(ad.Segments) == 0 {
		t.Fatalf("approval: %s", res.Details)
	}
}
