package hub

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/node/link"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

func ptr[T any](v T) *T { return &v }

// goodFinished is an exec.finished a real node sends.
func goodFinished() (apitype.NodeFinished, proto.Exit) {
	ex := proto.Exit{State: "exited", ExitCode: ptr(3), EndedAt: time.Now().UnixMilli(), DurationMs: 12,
		OutputBytes: 5, OutputSha256: strings.Repeat("ab", 32), Final: true, Reason: "line one\nline two"}
	raw, _ := json.Marshal(ex)
	return apitype.NodeFinished{RunID: "6f1c2b2e-1d2c-4c1e-9d7e-0c1f2e3d4c5b", SessionID: "quiet-bay-1", Host: "node", Command: "echo hi",
		ExitCode: ptr(3), State: "exited", Cursor: 5, Exit: raw}, ex
}

// finishedMutations returns, per field of exec.finished and of the exit
// record it carries, frames that break that field, with the field name
// the check must report. Numbers and lengths are drawn around their
// bounds.
func finishedMutations(rng *mrand.Rand) []struct {
	field string
	edit  func(*apitype.NodeFinished, *proto.Exit)
} {
	type m = struct {
		field string
		edit  func(*apitype.NodeFinished, *proto.Exit)
	}
	neg := func() int64 { return -1 - rng.Int63n(1<<40) }
	long := func(n int) string { return strings.Repeat("x", n+1+rng.Intn(1024)) }
	out := []m{
		{"sessionId", func(f *apitype.NodeFinished, _ *proto.Exit) { f.SessionID = "" }},
		{"sessionId", func(f *apitype.NodeFinished, _ *proto.Exit) { f.SessionID = "../etc" }},
		{"sessionId", func(f *apitype.NodeFinished, _ *proto.Exit) { f.SessionID = long(64) }},
		{"sessionId", func(f *apitype.NodeFinished, _ *proto.Exit) { f.SessionID = "Quiet" }},
		{"runId", func(f *apitype.NodeFinished, _ *proto.Exit) { f.RunID = long(maxToken) }},
		{"runId", func(f *apitype.NodeFinished, _ *proto.Exit) { f.RunID = "a b" }},
		{"host", func(f *apitype.NodeFinished, _ *proto.Exit) { f.Host = "gateway" }},
		{"command", func(f *apitype.NodeFinished, _ *proto.Exit) { f.Command = long(maxText) }},
		{"output", func(f *apitype.NodeFinished, _ *proto.Exit) { f.Output = long(maxOutput) }},
		{"cursor", func(f *apitype.NodeFinished, _ *proto.Exit) { f.Cursor = neg() }},
		{"state", func(f *apitype.NodeFinished, _ *proto.Exit) { f.State = "running" }},
		{"state", func(f *apitype.NodeFinished, _ *proto.Exit) { f.State = "" }},
		{"state", func(f *apitype.NodeFinished, _ *proto.Exit) { f.State = "EXITED" }},
		{"exitCode", func(f *apitype.NodeFinished, _ *proto.Exit) { f.ExitCode = ptr(-2 - rng.Intn(1000)) }},
		{"exitCode", func(f *apitype.NodeFinished, _ *proto.Exit) { f.ExitCode = ptr(256 + rng.Intn(1000)) }},
		{"exitCode", func(f *apitype.NodeFinished, _ *proto.Exit) { f.ExitCode = nil }},
		{"signal", func(f *apitype.NodeFinished, _ *proto.Exit) { f.Signal = ptr("KILL") }},
		{"signal", func(f *apitype.NodeFinished, _ *proto.Exit) {
			f.State, f.Signal, f.ExitCode = "signaled", nil, nil
		}},
		{"killedBy", func(f *apitype.NodeFinished, _ *proto.Exit) { f.KilledBy = ptr("Agent\n") }},
		{"killedBy", func(f *apitype.NodeFinished, _ *proto.Exit) { f.KilledBy = ptr(long(32)) }},
		{"exit", func(f *apitype.NodeFinished, _ *proto.Exit) { f.Exit = json.RawMessage(`"exited"`) }},
		{"exit", func(f *apitype.NodeFinished, _ *proto.Exit) { f.Exit = json.RawMessage(`{"state":5}`) }},
		{"exit.state", func(_ *apitype.NodeFinished, e *proto.Exit) { e.State = "running" }},
		{"exit.state", func(_ *apitype.NodeFinished, e *proto.Exit) { e.State = "" }},
		{"exit.exitCode", func(_ *apitype.NodeFinished, e *proto.Exit) { e.ExitCode = ptr(256 + rng.Intn(1<<20)) }},
		{"exit.exitCode", func(_ *apitype.NodeFinished, e *proto.Exit) { e.ExitCode = nil }},
		{"exit.signal", func(_ *apitype.NodeFinished, e *proto.Exit) { e.Signal = ptr("SIG" + long(12)) }},
		{"exit.killedBy", func(_ *apitype.NodeFinished, e *proto.Exit) { e.KilledBy = ptr("root; rm") }},
		{"exit.reason", func(_ *apitype.NodeFinished, e *proto.Exit) { e.Reason = strings.Repeat("r", 3<<20) }},
		{"exit.reason", func(_ *apitype.NodeFinished, e *proto.Exit) { e.Reason = long(maxReason) }},
		{"exit.reason", func(_ *apitype.NodeFinished, e *proto.Exit) { e.Reason = "done\x1b[2J" }},
		{"exit.endedAt", func(_ *apitype.NodeFinished, e *proto.Exit) { e.EndedAt = neg() }},
		{"exit.endedAt", func(_ *apitype.NodeFinished, e *proto.Exit) {
			e.EndedAt = time.Now().Add(48*time.Hour).UnixMilli() + rng.Int63n(1<<40)
		}},
		{"exit.durationMs", func(_ *apitype.NodeFinished, e *proto.Exit) { e.DurationMs = neg() }},
		{"exit.durationMs", func(_ *apitype.NodeFinished, e *proto.Exit) { e.DurationMs = maxMs + 1 + rng.Int63n(1<<40) }},
		{"exit.descendantsKilled", func(_ *apitype.NodeFinished, e *proto.Exit) { e.DescendantsKilled = -1 - rng.Intn(1000) }},
		{"exit.outputBytes", func(_ *apitype.NodeFinished, e *proto.Exit) { e.OutputBytes = neg() }},
		{"exit.droppedBytes", func(_ *apitype.NodeFinished, e *proto.Exit) { e.DroppedBytes = neg() }},
		{"exit.outputSha256", func(_ *apitype.NodeFinished, e *proto.Exit) { e.OutputSha256 = "zz" }},
	}
	return out
}

// TestCheckFinishedFields: every field of exec.finished is checked, and
// the check names the field; the good frame passes unchanged.
func TestCheckFinishedFields(t *testing.T) {
	rng := mrand.New(mrand.NewSource(time.Now().UnixNano()))
	f, want := goodFinished()
	ex, err := checkFinished(f)
	if err != nil || ex.State != want.State || *ex.ExitCode != 3 || ex.Reason != want.Reason || ex.DurationMs != 12 {
		t.Fatalf("good frame: %+v %v", ex, err)
	}
	// Without an exit record, the event's own fields make the end state.
	f.Exit = nil
	if ex, err := checkFinished(f); err != nil || ex.State != "exited" || *ex.ExitCode != 3 {
		t.Fatalf("good frame without record: %+v %v", ex, err)
	}
	for round := 0; round < 5; round++ {
		for _, m := range finishedMutations(rng) {
			f, e := goodFinished()
			m.edit(&f, &e)
			if strings.HasPrefix(m.field, "exit.") {
				f.Exit, _ = json.Marshal(e)
			}
			_, err := checkFinished(f)
			var ie *inputError
			if !errors.As(err, &ie) || ie.field != m.field {
				t.Fatalf("mutation of %s: got %v", m.field, err)
			}
			if len(err.Error()) > 512 {
				t.Fatalf("mutation of %s: error of %d bytes", m.field, len(err.Error()))
			}
		}
	}
}

func TestCheckOutputAndFrames(t *testing.T) {
	good := apitype.NodeOutput{RunID: "r1", SessionID: "s-1", Stream: "stdout", Cursor: 10, Data: []byte("hello")}
	if err := checkOutput(good); err != nil {
		t.Fatal(err)
	}
	for field, edit := range map[string]func(*apitype.NodeOutput){
		"sessionId": func(o *apitype.NodeOutput) { o.SessionID = "../../x" },
		"runId":     func(o *apitype.NodeOutput) { o.RunID = strings.Repeat("r", 200) },
		"stream":    func(o *apitype.NodeOutput) { o.Stream = "stdin" },
		"cursor":    func(o *apitype.NodeOutput) { o.Cursor = 4 }, // before the end of its own data
	} {
		o := good
		edit(&o)
		var ie *inputError
		if err := checkOutput(o); !errors.As(err, &ie) || ie.field != field {
			t.Errorf("output %s: %v", field, err)
		}
	}
	for field, f := range map[string]apitype.Frame{
		"type":          {Type: "hello", ID: "1"},
		"id":            {Type: "res", ID: strings.Repeat("9", 200)},
		"method":        {Type: "req", ID: "1", Method: "system run"},
		"event":         {Type: "event", Event: "exec.finished\n"},
		"error.code":    {Type: "res", ID: "1", Error: &apitype.Error{Code: "", Message: "x"}},
		"error.message": {Type: "res", ID: "1", Error: &apitype.Error{Code: "X", Message: strings.Repeat("m", maxReason+1)}},
	} {
		var ie *inputError
		if err := checkFrame(&f); !errors.As(err, &ie) || ie.field != field {
			t.Errorf("frame %s: %v", field, err)
		}
	}
	for _, c := range []struct{ method, payload, field string }{
		{"system.run", `{"sessionId":"s","pid":-4}`, "pid"},
		{"system.run", `{"sessionId":"S!","pid":4}`, "sessionId"},
		{"system.run.prepare", `{"planId":""}`, "planId"},
		{"system.run.prepare", `{"planId":"p","plan":{"exes":[{"path":"/bin/x","sha256":"no"}]}}`, "plan.exes[0].sha256"},
		{"system.session.status", `{"ok":true,"status":{"pid":1,"cursor":-1}}`, "status.cursor"},
		{"system.session.kill", `{"ok":false,"error":"` + strings.Repeat("e", maxReason+1) + `"}`, "error"},
		{"system.execApprovals.get", `{"path":"a\u0000b"}`, "path"},
		{"system.execApprovals.set", `{"hash":"a b"}`, "hash"},
		{"system.which", `{"paths":{"sh":"/bin/\u001bsh"}}`, "paths[sh]"},
		{"system.patch.apply", `{"text":"` + strings.Repeat("t", maxText+1) + `"}`, "text"},
	} {
		var ie *inputError
		if err := checkReply(c.method, json.RawMessage(c.payload)); !errors.As(err, &ie) || ie.field != c.field {
			t.Errorf("%s %s: %v", c.method, c.payload, err)
		}
	}
}

// hostile is a hand-driven node connected to a real hub over a real
// WebSocket: it sends what a real node never sends.
type hostile struct {
	t     *testing.T
	c     *websocket.Conn
	ctx   context.Context
	id    string
	url   string // of the hub's connect route
	pub   ed25519.PublicKey
	key   ed25519.PrivateKey
	token string // the node token it was paired with
}

func dialHostile(t *testing.T, h *Hub, name string) *hostile {
	t.Helper()
	srv := httptest.NewServer(connectHandler(h))
	t.Cleanup(srv.Close)
	tok, _, err := h.store.CreateInvite(time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/nodes/connect",
		&websocket.DialOptions{HTTPHeader: map[string][]string{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	c.SetReadLimit(8 << 20)
	n := &hostile{t: t, c: c, ctx: ctx, id: apitype.NodeIDOf(pub), url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/nodes/connect", pub: pub, key: key}
	var ch struct{ Nonce string }
	json.Unmarshal(n.read("event").Payload, &ch)
	hello := apitype.NodeHello{NodeID: n.id, PublicKey: base64.StdEncoding.EncodeToString(pub),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, apitype.NodeHelloMessage(ch.Nonce))),
		Name:      name, Caps: []string{"system.run"}}
	n.send(apitype.Frame{Type: "req", ID: "h1", Method: "node.hello", Params: mustJSON(hello)})
	n.read("res")
	for deadline := time.Now().Add(30 * time.Second); ; {
		h.mu.Lock()
		w := h.waiting[n.id] != nil
		h.mu.Unlock()
		if w {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("pairing request not waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := h.Approve(n.id); err != nil {
		t.Fatal(err)
	}
	var paired struct{ NodeToken string }
	json.Unmarshal(n.read("event").Payload, &paired) // node.paired
	n.token = paired.NodeToken
	return n
}

// connectHandler is GET /v1/nodes/connect as the HTTP adapter serves it.
func connectHandler(h *Hub) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { link.Accept(w, r, h.Admit) })
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func (n *hostile) send(f apitype.Frame) {
	n.t.Helper()
	if err := n.c.Write(n.ctx, websocket.MessageText, mustJSON(f)); err != nil {
		n.t.Fatal(err)
	}
}

// read returns the next frame of type typ (others are skipped).
func (n *hostile) read(typ string) apitype.Frame {
	n.t.Helper()
	f, err := n.next(typ)
	if err != nil {
		n.t.Fatalf("hostile node read: %v", err)
	}
	return f
}

func (n *hostile) next(typ string) (apitype.Frame, error) {
	for {
		_, b, err := n.c.Read(n.ctx)
		if err != nil {
			return apitype.Frame{}, err
		}
		var f apitype.Frame
		json.Unmarshal(b, &f)
		if f.Type == typ {
			return f, nil
		}
	}
}

// TestBadFinishedEndsLost: through a real hub and WebSocket, an end
// state with any bad field is not stored; the session ends as lost with
// the reason. A good one is stored as sent.
func TestBadFinishedEndsLost(t *testing.T) {
	// Not t.TempDir: the hub's connection handler may still write its
	// pairing state as the test ends (the HTTP server, not the hub, owns
	// the handler), which makes TempDir's cleanup fail.
	home, _ := os.MkdirTemp("", "nodehub")
	defer os.RemoveAll(home)
	h, err := New(Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	n := dialHostile(t, h, "evil")
	sock, _ := os.MkdirTemp("", "cnh")
	defer os.RemoveAll(sock)
	rng := mrand.New(mrand.NewSource(time.Now().UnixNano()))
	muts := finishedMutations(rng)
	for i := 0; i <= len(muts); i++ {
		sid := fmt.Sprintf("s-%d", i)
		f, e := goodFinished()
		field := ""
		if i < len(muts) {
			m := muts[i]
			if m.field == "sessionId" {
				continue // cannot name the session it would end
			}
			field = m.field
			m.edit(&f, &e)
			if strings.HasPrefix(field, "exit.") {
				f.Exit = mustJSON(e)
			}
		}
		f.SessionID = sid
		spec := proto.Spec{ID: sid, Agent: "main", Command: "true", Socket: filepath.Join(sock, fmt.Sprintf("%d.sock", i))}
		os.MkdirAll(proto.SessionDir(home, sid), 0o700)
		started := make(chan error, 1)
		go func() {
			_, err := h.Start(n.id, spec, apitype.NodeRunParams{SessionID: sid, Stream: true})
			started <- err
		}()
		reqs := make(chan apitype.Frame, 1)
		go func() { f, _ := n.next("req"); reqs <- f }()
		select {
		case req := <-reqs:
			n.send(apitype.Frame{Type: "res", ID: req.ID, OK: true, Payload: mustJSON(apitype.NodeRunReply{SessionID: sid, PID: 4242})})
		case err := <-started:
			t.Fatalf("start before system.run: %v", err)
		}
		if err := <-started; err != nil {
			t.Fatal(err)
		}
		n.send(apitype.Frame{Type: "event", Event: "exec.finished", Payload: mustJSON(f)})
		dir := proto.SessionDir(home, sid)
		var ex proto.Exit
		deadline := time.Now().Add(30 * time.Second)
		for {
			var ok bool
			if ex, ok, _ = proto.ReadExit(dir); ok && ex.Final {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s (%s): no end state recorded", sid, field)
			}
			time.Sleep(10 * time.Millisecond)
		}
		switch {
		case field == "" && (ex.State != "exited" || *ex.ExitCode != 3 || ex.Reason != e.Reason):
			t.Errorf("good end state stored as %+v", ex)
		case field != "" && (ex.State != "lost" || !strings.Contains(ex.Reason, field+":") || len(ex.Reason) > 1024):
			t.Errorf("bad %s stored as %+v", field, ex)
		}
		if ex.DurationMs < 0 || ex.OutputBytes < 0 {
			t.Errorf("%s: negative numbers stored: %+v", field, ex)
		}
	}
}

// TestFramesOfAnotherNode: through a real hub and WebSockets, a paired
// node sending output and end states for a session that runs on another
// node changes nothing of it; a second end state from the right node
// does not replace the first.
func TestFramesOfAnotherNode(t *testing.T) {
	home, _ := os.MkdirTemp("", "nodehub")
	defer os.RemoveAll(home)
	h, err := New(Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	a, b := dialHostile(t, h, "honest"), dialHostile(t, h, "evil")
	sock, _ := os.MkdirTemp("", "cnh")
	defer os.RemoveAll(sock)
	const sid = "calm-lake"
	os.MkdirAll(proto.SessionDir(home, sid), 0o700)
	started := make(chan error, 1)
	go func() {
		_, err := h.Start(a.id, proto.Spec{ID: sid, Agent: "main", Command: "true", Socket: filepath.Join(sock, "s.sock")},
			apitype.NodeRunParams{SessionID: sid, Stream: true})
		started <- err
	}()
	req := a.read("req")
	a.send(apitype.Frame{Type: "res", ID: req.ID, OK: true, Payload: mustJSON(apitype.NodeRunReply{SessionID: sid, PID: 4242})})
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	// flush waits until the hub has handled every frame n sent before.
	flush := func(n *hostile) {
		n.send(apitype.Frame{Type: "req", ID: "flush", Method: "no.such"})
		for {
			if f := n.read("res"); f.ID == "flush" {
				return
			}
		}
	}
	fin, _ := goodFinished()
	fin.SessionID, fin.Exit = sid, nil
	// The other node: output (both forms) and an end state for a's session.
	b.send(apitype.Frame{Type: "event", Event: "exec.output", Payload: mustJSON(apitype.NodeOutput{SessionID: sid, Stream: "stdout", Data: []byte("EVIL"), Cursor: 4})})
	if err := b.c.Write(b.ctx, websocket.MessageBinary, apitype.EncodeNodeOutput(apitype.NodeOutput{SessionID: sid, Stream: "stdout", Data: []byte("EVIL2"), Cursor: 9})); err != nil {
		t.Fatal(err)
	}
	evil := fin
	evil.ExitCode = ptr(66)
	b.send(apitype.Frame{Type: "event", Event: "exec.finished", Payload: mustJSON(evil)})
	flush(b)
	if _, ok, _ := proto.ReadExit(proto.SessionDir(home, sid)); ok {
		t.Fatalf("another node ended the session")
	}
	// The session's own node: its output, its end, then a second end.
	a.send(apitype.Frame{Type: "event", Event: "exec.output", Payload: mustJSON(apitype.NodeOutput{SessionID: sid, Stream: "stdout", Data: []byte("hello"), Cursor: 5})})
	a.send(apitype.Frame{Type: "event", Event: "exec.finished", Payload: mustJSON(fin)})
	again := fin
	again.ExitCode = ptr(9)
	a.send(apitype.Frame{Type: "event", Event: "exec.finished", Payload: mustJSON(again)})
	flush(a)
	ex, ok, _ := proto.ReadExit(proto.SessionDir(home, sid))
	if !ok || ex.State != "exited" || ex.ExitCode == nil || *ex.ExitCode != 3 || ex.OutputBytes != 5 {
		t.Fatalf("end state: %+v (ok %v), want exited 3 after the node's 5 bytes", ex, ok)
	}
}

// TestHelloWithAnotherNodesToken: a paired node presenting another
// node's token is refused whichever identity it claims: its own (the
// token is not its), or the other's id and key (it cannot sign for
// them); the other node keeps its connection and its name.
func TestHelloWithAnotherNodesToken(t *testing.T) {
	home, _ := os.MkdirTemp("", "nodehub")
	defer os.RemoveAll(home)
	h, err := New(Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	a, b := dialHostile(t, h, "honest"), dialHostile(t, h, "evil")
	for name, mutate := range map[string]func(*apitype.NodeHello){
		"own identity":       func(*apitype.NodeHello) {},
		"other's id":         func(hl *apitype.NodeHello) { hl.NodeID = a.id },
		"other's id and key": func(hl *apitype.NodeHello) { hl.NodeID, hl.PublicKey = a.id, base64.StdEncoding.EncodeToString(a.pub) },
		"other's id and key, renamed": func(hl *apitype.NodeHello) {
			hl.NodeID, hl.PublicKey, hl.Name = a.id, base64.StdEncoding.EncodeToString(a.pub), "evil"
		},
	} {
		c, _, err := websocket.Dial(b.ctx, b.url, &websocket.DialOptions{HTTPHeader: map[string][]string{"Authorization": {"Bearer " + a.token}}})
		if err != nil {
			t.Fatalf("%s: dial: %v", name, err)
		}
		_, msg, err := c.Read(b.ctx)
		if err != nil {
			t.Fatalf("%s: challenge: %v", name, err)
		}
		var f apitype.Frame
		json.Unmarshal(msg, &f)
		var ch struct{ Nonce string }
		json.Unmarshal(f.Payload, &ch)
		hl := apitype.NodeHello{NodeID: b.id, PublicKey: base64.StdEncoding.EncodeToString(b.pub),
			Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(b.key, apitype.NodeHelloMessage(ch.Nonce))), Name: "evil", Caps: []string{"system.run"}}
		mutate(&hl)
		c.Write(b.ctx, websocket.MessageText, mustJSON(apitype.Frame{Type: "req", ID: "h1", Method: "node.hello", Params: mustJSON(hl)}))
		for {
			_, msg, err = c.Read(b.ctx)
			if err != nil {
				break
			}
			if json.Unmarshal(msg, &f) == nil && f.Type == "res" && f.OK {
				t.Fatalf("%s: hello accepted: %s", name, msg)
			}
		}
		if code := link.CloseCodeOf(err); code != CloseAuth {
			t.Fatalf("%s: closed with %d (%v), want %d", name, code, err, CloseAuth)
		}
	}
	h.mu.Lock()
	ca := h.conns[a.id]
	h.mu.Unlock()
	if ca == nil || ca.hello.PublicKey != base64.StdEncoding.EncodeToString(a.pub) {
		t.Fatalf("the honest node lost its connection")
	}
	if ref, aerr := h.Select(a.id); aerr != nil || ref.ID != a.id || ref.Name != "honest" {
		t.Fatalf("select the honest node: %+v %v", ref, aerr)
	}
}
