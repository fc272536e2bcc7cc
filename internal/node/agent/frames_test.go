package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/conchsh/conch/apitype"
	nodeagent "github.com/conchsh/conch/internal/node/agent"
	"github.com/conchsh/conch/internal/node/link"
	"github.com/conchsh/conch/internal/node/port"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// alive checks that the node still answers a request on gc.
func alive(t *testing.T, ctx context.Context, gc *gwConn, after string) {
	t.Helper()
	r := gc.call(t, ctx, "system.which", map[string]any{"names": []string{"sh"}})
	if !r.OK || !strings.Contains(string(r.Payload), `"sh":"/`) {
		t.Fatalf("after %s the node no longer answers: %+v", after, r)
	}
}

// rangedFields yields the JSON name and declared range of every numeric
// field of the struct type of v that has a range tag.
func rangedFields(t *testing.T, v any) map[string]apitype.Range {
	t.Helper()
	out := map[string]apitype.Range{}
	rt := reflect.TypeOf(v)
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		tag := f.Tag.Get("range")
		if tag == "" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		r, err := apitype.ParseRange(name, tag)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = r
	}
	if len(out) == 0 {
		t.Fatalf("%T has no ranged field", v)
	}
	return out
}

// stringFields yields the JSON names of the string, []string and
// map[string]string fields of the struct type of v.
func stringFields(v any) map[string]reflect.Kind {
	out := map[string]reflect.Kind{}
	rt := reflect.TypeOf(v)
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Type.Kind() == reflect.String,
			f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String,
			f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.String:
			out[name] = f.Type.Kind()
		}
	}
	return out
}

// TestNodeRefusesBadParams: every request whose params are not what the
// method takes is answered INVALID_REQUEST with the reason, and the node
// keeps serving. The members are generated: params of the wrong JSON type
// for every method that takes params; every numeric field with a declared
// range (NodeRunParams, NodeSessionParams, and the forwarded supervisor
// request) just outside it, far outside it, and fractional; a NUL byte in
// every string field of a run.
func TestNodeRefusesBadParams(t *testing.T) {
	ctx := testCtx(t)
	g := newGateway(t)
	g.start()
	startNode(t, g, `{"tools":{"exec":{"security":"full","ask":"off"}}}`)
	gc := g.conn(ctx)

	methods := []string{"system.run.prepare", "system.run", "system.session.read", "system.session.kill", "system.session.write",
		"system.patch.apply", "system.execApprovals.set", "system.which"}
	for _, m := range methods {
		for _, bad := range []string{`5`, `"text"`, `[1,2]`, `true`, `{"command":5,"sessionId":[],"request":"x","input":7,"names":"sh","file":1}`} {
			r := gc.call(t, ctx, m, json.RawMessage(bad))
			wantError(t, fmt.Sprintf("%s %s", m, bad), r, apitype.NodeInvalidRequest, "INVALID_REQUEST: ")
		}
	}
	alive(t, ctx, gc, "params of the wrong type")

	// Numbers: each ranged field outside its range. The other fields are
	// left empty: the range check comes before any other.
	type numCase struct {
		method string
		params func(field string, v json.RawMessage) json.RawMessage
		ranges map[string]apitype.Range
	}
	flat := func(field string, v json.RawMessage) json.RawMessage {
		return mustJSON(map[string]json.RawMessage{field: v, "sessionId": mustJSON("s-1"), "stream": mustJSON(true)})
	}
	nested := func(field string, v json.RawMessage) json.RawMessage {
		return mustJSON(map[string]any{"sessionId": "s-1", "request": map[string]json.RawMessage{field: v}})
	}
	for _, c := range []numCase{
		{"system.run", flat, rangedFields(t, apitype.NodeRunParams{})},
		{"system.session.read", flat, rangedFields(t, apitype.NodeSessionParams{})},
		{"system.session.signal", nested, rangedFields(t, proto.Request{})},
	} {
		for field, rg := range c.ranges {
			over := rg.Max + 1
			if over == rg.Max { // above 2^53
				over = 2 * rg.Max
			}
			for _, v := range []string{fmt.Sprintf("%.0f", rg.Min-1), fmt.Sprintf("%.0f", over), "-1e300", "1e300", "1.5"} {
				if v == "1.5" && !rg.Int {
					continue
				}
				r := gc.call(t, ctx, c.method, c.params(field, json.RawMessage(v)))
				wantError(t, fmt.Sprintf("%s %s=%s", c.method, field, v), r, apitype.NodeInvalidRequest, field)
			}
		}
	}
	alive(t, ctx, gc, "numbers out of range")

	// A NUL byte in each string field of a run.
	for field, kind := range stringFields(apitype.NodeRunParams{}) {
		var v any = "a\x00b"
		switch kind {
		case reflect.Slice:
			v = []string{"/bin/sh", "-lc", "echo \x00"}
		case reflect.Map:
			v = map[string]string{"FOO": "a\x00b"}
		}
		p := map[string]any{"sessionId": "s-1", "stream": true, field: v}
		r := gc.call(t, ctx, "system.run", mustJSON(p))
		wantError(t, "a NUL in "+field, r, apitype.NodeInvalidRequest, "NUL")
	}
	for _, field := range []string{"rawCommand", "cwd", "agentId", "envHash"} {
		p := map[string]any{"command": []string{"/bin/sh", "-lc", "true"}, "rawCommand": "true", "agentId": "main", field: "a\x00b"}
		r := gc.call(t, ctx, "system.run.prepare", mustJSON(p))
		wantError(t, "a NUL in the prepare's "+field, r, apitype.NodeInvalidRequest, "NUL")
	}
	alive(t, ctx, gc, "NUL bytes")
}

// TestNodeIgnoresWhatIsNotARequest: text that is not JSON, frames of an
// unknown type, replies nobody asked for (and replies to the node's own
// hello, again), unknown events, and requests without a method or of an
// unknown one: the node answers each request with a clear error, drops
// the rest, and keeps its link and its sessions.
func TestNodeIgnoresWhatIsNotARequest(t *testing.T) {
	ctx := testCtx(t)
	g := newGateway(t)
	g.start()
	startNode(t, g, `{"tools":{"exec":{"security":"full","ask":"off"}}}`)
	gc := g.conn(ctx)
	for _, raw := range []string{
		`not json`, `{"type":`, `[]`, `null`, `"req"`, `{}`,
		`{"type":"bogus","id":"x1","method":"system.run"}`,
		`{"type":"res","id":"hello","ok":true,"payload":{"status":"paired"}}`,
		`{"type":"res","id":"r999999","ok":false,"error":{"code":"X","message":"late"}}`,
		`{"type":"event","event":"no.such.event","payload":{"a":1}}`,
		`{"type":"event","event":"node.paired","payload":"not an object"}`,
		`{"type":"event","event":"connect.challenge","payload":{"nonce":"again"}}`,
	} {
		gc.sendRaw(t, ctx, []byte(raw))
		alive(t, ctx, gc, raw)
	}
	wantError(t, "an unknown method", gc.call(t, ctx, "system.reboot", struct{}{}), apitype.NodeInvalidRequest, "unknown method system.reboot")
	wantError(t, "no method", gc.send(t, ctx, apitype.Frame{Type: "req"}), apitype.NodeInvalidRequest, "unknown method")
	select {
	case <-gc.done:
		t.Fatalf("the node closed the link: %v", gc.err)
	default:
	}
}

// TestNodeSurvivesAnOversizedMessage: a message over the node's read
// limit ends that link (the node cannot read it), never the node: it
// dials again and serves the next link.
func TestNodeSurvivesAnOversizedMessage(t *testing.T) {
	ctx := testCtx(t)
	g := newGateway(t)
	g.start()
	n := startNode(t, g, `{"tools":{"exec":{"security":"full","ask":"off"}}}`)
	gc := g.conn(ctx)
	big := `{"type":"req","id":"big","method":"system.which","params":{"names":["` + strings.Repeat("a", link.DialReadLimit) + `"]}}`
	if err := gc.c.Write(ctx, websocket.MessageText, []byte(big)); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("write of the oversized message: %v", err)
	}
	select {
	case <-gc.done:
	case <-ctx.Done():
		t.Fatal("the node kept a link it could not read")
	}
	if code := websocket.CloseStatus(gc.err); code != websocket.StatusMessageTooBig {
		t.Logf("the link ended with %v (close status %d)", gc.err, code)
	}
	gc2 := g.conn(ctx)
	alive(t, ctx, gc2, "an oversized message on the previous link")
	if tok := lastToken(g); tok != "cnt_test" {
		t.Fatalf("the node reconnected with token %q, want the node token it was given", tok)
	}
	select {
	case err := <-n.errc:
		t.Fatalf("nodehost.Run returned: %v", err)
	default:
	}
}

func lastToken(g *gateway) string {
	tok := ""
	for {
		select {
		case tok = <-g.tokens:
		default:
			return tok
		}
	}
}

// TestNodeHandshakeRefusals: what ends the node for good (its token
// refused, its hello refused, its pairing rejected, its removal) returns
// from Run with an error wrapping ErrFatal that says why; a gateway that
// opens with anything but a challenge is only a failed connection (the
// node dials again).
func TestNodeHandshakeRefusals(t *testing.T) {
	ctx := testCtx(t)
	cases := []struct {
		name  string
		setup func(g *gateway)
		token string
		want  string
	}{
		{"join token refused", func(g *gateway) { g.admit = func(string) error { return errRefused } }, "cnj_join", "refused the join token"},
		{"node token refused", func(g *gateway) { g.admit = func(string) error { return errRefused } }, "cnt_old", "refused this node's token"},
		{"hello refused", func(g *gateway) {
			g.hello = func(apitype.NodeHello) (apitype.Frame, bool) {
				return apitype.Frame{Type: "res", Error: &apitype.Error{Code: apitype.NodeUnauthorized, Message: "unknown key"}}, false
			}
		}, "cnj_join", "unknown key"},
		{"pairing rejected", func(g *gateway) {
			g.hello = func(h apitype.NodeHello) (apitype.Frame, bool) {
				return apitype.Frame{Type: "res", OK: true, Payload: mustJSON(apitype.NodeHelloReply{Status: "pending", RequestID: "q1", NodeID: h.NodeID})}, false
			}
			g.afterHello = func(ctx context.Context, gc *gwConn) {
				gc.frame(ctx, apitype.Frame{Type: "event", Event: "node.rejected"})
			}
		}, "cnj_join", "rejected the pairing"},
		{"removed", func(g *gateway) {}, "cnj_join", "removed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newGateway(t)
			c.setup(g)
			g.start()
			n := startNodeHome(t, g, t.TempDir(), c.token, nil)
			if c.name == "removed" {
				gc := g.conn(ctx)
				gc.c.Close(websocket.StatusCode(link.CloseRevoked), "node removed")
			}
			err := n.wait(t, ctx)
			if !errors.Is(err, nodeagent.ErrFatal) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run returned %v, want a fatal error saying %q", err, c.want)
			}
		})
	}

	// Not a challenge: the node dials again, and pairs when the gateway
	// behaves.
	g := newGateway(t)
	var first sync.Once
	g.challenge = func(gc *gwConn) bool {
		bad := false
		first.Do(func() { bad = true })
		if bad {
			gc.frame(ctx, apitype.Frame{Type: "event", Event: "something.else"})
			return false
		}
		return gc.frame(ctx, apitype.Frame{Type: "event", Event: "connect.challenge", Payload: mustJSON(map[string]string{"nonce": "n0nce"})}) == nil
	}
	g.start()
	startNode(t, g, "")
	alive(t, ctx, g.conn(ctx), "a connection that opened without a challenge")
}

// blockingEngine is the real engine with one fault put in: judging a
// command of agent "panic" panics and of agent "block" waits for
// release. A real engine has neither fault to show, so this is the one
// fake here.
type blockingEngine struct {
	nodeagent.Engine
	release chan struct{}
}

func (e blockingEngine) JudgeLocal(agent, security, ask, raw, cwd string) (port.Judgement, error) {
	switch agent {
	case "panic":
		panic("a fault in the engine")
	case "block":
		<-e.release
	}
	return e.Engine.JudgeLocal(agent, security, ask, raw, cwd)
}

// TestNodeRequestFaultsStayInTheirRequest: a request whose handler panics
// is answered UNAVAILABLE and the node goes on; one that blocks does not
// hold up the others.
func TestNodeRequestFaultsStayInTheirRequest(t *testing.T) {
	ctx := testCtx(t)
	g := newGateway(t)
	g.start()
	release := make(chan struct{})
	startNodeHome(t, g, t.TempDir(), "cnj_join", func(e nodeagent.Engine) nodeagent.Engine { return blockingEngine{e, release} })
	gc := g.conn(ctx)
	wantError(t, "a panicking handler", gc.call(t, ctx, "system.run.prepare", apitype.NodePrepareParams{AgentID: "panic", Command: []string{"true"}, RawCommand: "true"}), apitype.NodeUnavailable, "a fault in the engine")
	alive(t, ctx, gc, "a panic")

	blocked := make(chan apitype.Frame, 1)
	go func() {
		blocked <- gc.call(t, ctx, "system.run.prepare", apitype.NodePrepareParams{AgentID: "block", Command: []string{"true"}, RawCommand: "true"})
	}()
	alive(t, ctx, gc, "a request that blocks")
	close(release)
	select {
	case r := <-blocked:
		if r.Error == nil && !r.OK {
			t.Fatalf("the released request: %+v", r)
		}
	case <-ctx.Done():
		t.Fatal("the released request was never answered")
	}
}

// TestNodeLeavesASilentGateway: a gateway that stops reading (its link
// alive, its pongs gone) never holds the node: the keepalive gives up on
// it within three ping intervals, and the node dials again.
func TestNodeLeavesASilentGateway(t *testing.T) {
	ctx := testCtx(t)
	g := newGateway(t)
	g.stall.Store(1)
	g.start()
	startNode(t, g, `{"tools":{"exec":{"security":"full","ask":"off"}}}`)
	select {
	case <-g.stalled:
	case <-ctx.Done():
		t.Fatal("the node did not connect")
	}
	alive(t, ctx, g.conn(ctx), "a gateway that went silent")
}
