package agent_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/admin"
	"github.com/conchsh/conch/internal/node/agent"
	"github.com/conchsh/conch/internal/node/link"
	"github.com/conchsh/conch/internal/session/shim/entry"
	"github.com/conchsh/conch/internal/store/approvals"
)

// The node under test is the real thing: agent.Run over a real local
// engine (its own home, policy and supervisors, which are this test
// binary re-executed) dialling, through internal/node/link, a loopback
// WebSocket server. Only the gateway is played by the test: it speaks the
// gateway side of the protocol (challenge, signature check, pairing) with
// the WebSocket library itself, as a gateway of another make (or a
// hostile one) would, so that it can send what node/link never sends (text
// that is not JSON, messages over the size limit).
func TestMain(m *testing.M) {
	if code, ok := entry.Main(os.Args[1:]); ok { // conch-shim's entry points
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// testCtx is a context that ends with the test, at the latest after a
// minute (a loaded machine included).
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// gateway is the test's side of the link.
type gateway struct {
	t     *testing.T
	url   string
	conns chan *gwConn
	// hello decides the answer to a node's hello (nil: paired, and a
	// node.paired event with token "cnt_test").
	hello func(h apitype.NodeHello) (reply apitype.Frame, paired bool)
	// afterHello, if set, is called once the hello is answered, instead
	// of the pairing; the link then lasts until the node closes it.
	afterHello func(ctx context.Context, gc *gwConn)
	// admit refuses tokens (nil: any token is admitted).
	admit func(tok string) error
	// challenge replaces the first frame sent (nil: a proper challenge).
	challenge func(c *gwConn) bool
	tokens    chan string // every token seen, in order
	// stall is how many paired connections are left unread (their
	// pings unanswered); each is sent on stalled instead of conns.
	stall   atomic.Int64
	stalled chan *gwConn
}

// gwConn is one admitted, paired connection.
type gwConn struct {
	c      *websocket.Conn
	hello  apitype.NodeHello
	n      atomic.Int64
	mu     sync.Mutex // guards waits
	waits  map[string]chan apitype.Frame
	events chan apitype.Frame
	output chan apitype.NodeOutput
	done   chan struct{} // closed when the link's reader ends
	err    error         // why it ended; read after done
}

func newGateway(t *testing.T) *gateway {
	return &gateway{t: t, conns: make(chan *gwConn, 8), tokens: make(chan string, 64), stalled: make(chan *gwConn, 8)}
}

// start serves the gateway on a loopback listener.
func (g *gateway) start() {
	ctx := testCtx(g.t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		select {
		case g.tokens <- tok:
		default:
		}
		if g.admit != nil {
			if err := g.admit(tok); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.SetReadLimit(link.MaxFrame + 4096)
		g.serve(ctx, &gwConn{c: c, waits: map[string]chan apitype.Frame{}, events: make(chan apitype.Frame, 256),
			output: make(chan apitype.NodeOutput, 256), done: make(chan struct{})})
	}))
	g.t.Cleanup(srv.Close)
	g.url = srv.URL
}

func (g *gateway) serve(ctx context.Context, c *gwConn) {
	defer c.c.CloseNow()
	if g.challenge != nil {
		if !g.challenge(c) {
			return
		}
	} else {
		b, _ := json.Marshal(map[string]string{"nonce": "n0nce"})
		if c.frame(ctx, apitype.Frame{Type: "event", Event: "connect.challenge", Payload: b}) != nil {
			return
		}
	}
	_, b, err := c.c.Read(ctx)
	var f apitype.Frame
	if err != nil || json.Unmarshal(b, &f) != nil || f.Method != "node.hello" {
		return
	}
	var h apitype.NodeHello
	json.Unmarshal(f.Params, &h)
	pub, _ := base64.StdEncoding.DecodeString(h.PublicKey)
	sig, _ := base64.StdEncoding.DecodeString(h.Signature)
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, apitype.NodeHelloMessage("n0nce"), sig) || apitype.NodeIDOf(pub) != h.NodeID {
		c.frame(ctx, apitype.Frame{Type: "res", ID: f.ID, Error: &apitype.Error{Code: apitype.NodeUnauthorized, Message: "bad signature"}})
		return
	}
	reply, paired := apitype.Frame{Type: "res", ID: f.ID, OK: true, Payload: mustJSON(apitype.NodeHelloReply{Status: "paired", NodeID: h.NodeID})}, true
	if g.hello != nil {
		reply, paired = g.hello(h)
		reply.ID = f.ID
	}
	if c.frame(ctx, reply) != nil {
		return
	}
	if g.afterHello != nil {
		g.afterHello(ctx, c)
		c.c.Read(ctx) // until the node closes
		return
	}
	if !paired {
		return
	}
	if c.frame(ctx, apitype.Frame{Type: "event", Event: "node.paired", Payload: mustJSON(map[string]string{"nodeToken": "cnt_test"})}) != nil {
		return
	}
	c.hello = h
	if g.stall.Add(-1) >= 0 {
		// Paired, then never reads again: pings go unanswered.
		g.stalled <- c
		<-ctx.Done()
		return
	}
	g.conns <- c
	c.read(ctx)
}

// frame writes f as a text message.
func (gc *gwConn) frame(ctx context.Context, f apitype.Frame) error {
	return gc.c.Write(ctx, websocket.MessageText, mustJSON(f))
}

// read demultiplexes what the node sends: replies to their callers,
// events and output to their channels.
func (gc *gwConn) read(ctx context.Context) {
	defer close(gc.done)
	for {
		typ, b, err := gc.c.Read(ctx)
		if err != nil {
			gc.err = err
			return
		}
		if typ == websocket.MessageBinary {
			o, err := apitype.DecodeNodeOutput(b)
			if err == nil {
				o.Data = append([]byte(nil), o.Data...)
				gc.output <- o
			}
			continue
		}
		var f apitype.Frame
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		switch f.Type {
		case "res":
			gc.mu.Lock()
			w := gc.waits[f.ID]
			delete(gc.waits, f.ID)
			gc.mu.Unlock()
			if w != nil {
				w <- f
			}
		case "event":
			gc.events <- f
		}
	}
}

// conn waits for the node's next paired connection.
func (g *gateway) conn(ctx context.Context) *gwConn {
	g.t.Helper()
	select {
	case c := <-g.conns:
		return c
	case <-ctx.Done():
		g.t.Fatal("the node did not connect")
		return nil
	}
}

// call sends a request with params (marshalled, or raw when a
// json.RawMessage) and waits for its reply.
func (gc *gwConn) call(t *testing.T, ctx context.Context, method string, params any) apitype.Frame {
	t.Helper()
	raw, ok := params.(json.RawMessage)
	if !ok {
		raw = mustJSON(params)
	}
	return gc.send(t, ctx, apitype.Frame{Type: "req", Method: method, Params: raw})
}

// send sends f under a fresh id and waits for its reply.
func (gc *gwConn) send(t *testing.T, ctx context.Context, f apitype.Frame) apitype.Frame {
	t.Helper()
	f.ID = fmt.Sprintf("r%d", gc.n.Add(1))
	w := make(chan apitype.Frame, 1)
	gc.mu.Lock()
	gc.waits[f.ID] = w
	gc.mu.Unlock()
	if err := gc.frame(ctx, f); err != nil {
		t.Fatalf("send %s: %v", f.Method, err)
	}
	select {
	case r := <-w:
		return r
	case <-gc.done:
		t.Fatalf("%s: the link ended before the node answered", f.Method)
	case <-ctx.Done():
		t.Fatalf("%s: the node did not answer", f.Method)
	}
	return apitype.Frame{}
}

// sendRaw writes a text message as it is.
func (gc *gwConn) sendRaw(t *testing.T, ctx context.Context, b []byte) {
	t.Helper()
	if err := gc.c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("send raw: %v", err)
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// node is a running node host.
type node struct {
	home string
	eng  *engine.Engine
	errc chan error
	stop context.CancelFunc
}

// startNode starts agent.Run for a fresh home whose config.json is
// config, paired by join token with the gateway g.
func startNode(t *testing.T, g *gateway, config string) *node {
	t.Helper()
	home := t.TempDir()
	if config != "" {
		if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return startNodeHome(t, g, home, "cnj_join", nil)
}

// startNodeHome starts agent.Run on home with token; wrap, if set,
// wraps the engine the node host is given.
func startNodeHome(t *testing.T, g *gateway, home, token string, wrap func(agent.Engine) agent.Engine) *node {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{Home: home, Mode: "node", Workdir: home, SupervisorArgv: []string{self, "supervise"}})
	if err != nil {
		t.Fatal(err)
	}
	var ne agent.Engine = eng
	if wrap != nil {
		ne = wrap(eng)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{home: home, eng: eng, errc: make(chan error, 1), stop: cancel}
	go func() {
		n.errc <- agent.Run(ctx, agent.Options{
			Engine: ne, ApplyPatch: engine.ApplyPatchLocal,
			SetApprovals: func(home string, f *approvals.File, baseHash, by string) error {
				_, err := admin.SetApprovals(home, f, baseHash, by, nil)
				return err
			},
			Home: home, Gateway: g.url, Token: token, Name: "test-node", Version: "test",
			Ping: 200 * time.Millisecond,
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-n.errc:
		case <-time.After(time.Minute):
			t.Error("nodehost.Run did not return after its context ended")
		}
		eng.Close()
	})
	return n
}

// wait returns Run's error once it returns by itself.
func (n *node) wait(t *testing.T, ctx context.Context) error {
	t.Helper()
	select {
	case err := <-n.errc:
		n.errc <- err // for the cleanup
		return err
	case <-ctx.Done():
		t.Fatal("nodehost.Run did not return")
		return nil
	}
}

// wantError checks that r is a refusal with code whose message contains
// each of parts.
func wantError(t *testing.T, what string, r apitype.Frame, code string, parts ...string) {
	t.Helper()
	if r.OK || r.Error == nil {
		t.Fatalf("%s: want error %s, got ok %s", what, code, r.Payload)
	}
	if r.Error.Code != code {
		t.Fatalf("%s: code %s (%s), want %s", what, r.Error.Code, r.Error.Message, code)
	}
	for _, p := range parts {
		if !strings.Contains(r.Error.Message, p) {
			t.Fatalf("%s: message %q, want it to say %q", what, r.Error.Message, p)
		}
	}
}

var errRefused = errors.New("refused by the test gateway")
