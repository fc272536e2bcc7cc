package hub

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/conchsh/conch/apitype"
)

// tapListener hands out connections that report when the hub writes a
// close frame on them and when the hub closes them.
type tapListener struct {
	net.Listener
	conns chan *tapConn
}

func (l *tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &tapConn{Conn: c, closeSent: make(chan struct{}), closed: make(chan struct{})}
	l.conns <- tc
	return tc, nil
}

type tapConn struct {
	net.Conn
	sentOnce, closeOnce sync.Once
	closeSent, closed   chan struct{}
}

// isCloseFrame matches the start of an unmasked close frame (server to
// client) of any length and code.
func isCloseFrame(p []byte) bool {
	for i := range p {
		if p[i] == 0x88 && i+1 < len(p) && p[i+1] >= 2 && p[i+1] <= 125 {
			return true
		}
	}
	return false
}

func (c *tapConn) Write(p []byte) (int, error) {
	if isCloseFrame(p) {
		c.sentOnce.Do(func() { close(c.closeSent) })
	}
	return c.Conn.Write(p)
}

func (c *tapConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// closeEnv is a hub behind a real HTTP server on loopback.
type closeEnv struct {
	t      *testing.T
	h      *Hub
	url    string
	invite string
	taps   chan *tapConn
	ctx    context.Context
}

func newCloseEnv(t *testing.T) *closeEnv {
	// Not t.TempDir: see TestBadFinishedEndsLost.
	home, _ := os.MkdirTemp("", "nodehub")
	t.Cleanup(func() { os.RemoveAll(home) })
	h, err := New(Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	taps := make(chan *tapConn, 16)
	srv := httptest.NewUnstartedServer(connectHandler(h))
	srv.Listener.Close()
	srv.Listener = &tapListener{Listener: ln, conns: taps}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close) // before the server: it waits for the handshakes
	tok, _, err := h.store.CreateInvite(time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &closeEnv{t: t, h: h, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/nodes/connect", invite: tok, taps: taps, ctx: ctx}
}

// peer is a node driven by hand; after its hello it reads only when told.
type peer struct {
	c   *websocket.Conn
	tap *tapConn // the hub's side of the connection
	id  string
}

// hello connects with tok as the node of key and returns after the
// hello's answer (status "pending" or "paired").
func (e *closeEnv) hello(key ed25519.PrivateKey, tok string) (*peer, string) {
	e.t.Helper()
	c, _, err := websocket.Dial(e.ctx, e.url, &websocket.DialOptions{HTTPHeader: map[string][]string{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.CloseNow() })
	var tap *tapConn
	select {
	case tap = <-e.taps:
	case <-e.ctx.Done():
		e.t.Fatal("no connection accepted")
	}
	pub := key.Public().(ed25519.PublicKey)
	p := &peer{c: c, tap: tap, id: apitype.NodeIDOf(pub)}
	ch := p.read(e, "event")
	var nonce struct{ Nonce string }
	json.Unmarshal(ch.Payload, &nonce)
	hl := apitype.NodeHello{NodeID: p.id, PublicKey: base64.StdEncoding.EncodeToString(pub),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, apitype.NodeHelloMessage(nonce.Nonce))),
		Name:      "n" + p.id[:6], Caps: []string{"system.run"}}
	if err := c.Write(e.ctx, websocket.MessageText, mustJSON(apitype.Frame{Type: "req", ID: "h1", Method: "node.hello", Params: mustJSON(hl)})); err != nil {
		e.t.Fatal(err)
	}
	var rep apitype.NodeHelloReply
	json.Unmarshal(p.read(e, "res").Payload, &rep)
	return p, rep.Status
}

func (p *peer) read(e *closeEnv, typ string) apitype.Frame {
	e.t.Helper()
	for {
		_, b, err := p.c.Read(e.ctx)
		if err != nil {
			e.t.Fatalf("peer %s: %v", p.id, err)
		}
		var f apitype.Frame
		json.Unmarshal(b, &f)
		if f.Type == typ {
			return f
		}
	}
}

// waitFor polls the hub's maps until cond holds.
func (e *closeEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	for {
		e.h.mu.Lock()
		ok := cond()
		e.h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func newKey() ed25519.PrivateKey {
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	return k
}

// TestSilentPeerCloseDoesNotBlockHub: every way the hub ends a node's
// connection (a newer connection of the node replaces it, as a pairing
// request or paired; the node is removed or its request rejected) starts
// a close handshake, which waits for the peer's answer for several
// seconds. A peer that never answers (real sockets on loopback, the peer
// stops reading) must hold up neither the operation that closes it nor
// any other hub operation: while its handshake is pending, listing,
// selecting, inviting and pairing another node all return.
func TestSilentPeerCloseDoesNotBlockHub(t *testing.T) {
	cases := []struct {
		name   string
		paired bool // the silent peer is a paired node, not a request
		// trigger makes the hub close the silent peer a; it may block
		// (in the goroutine it runs in) only until the close started.
		trigger func(e *closeEnv, key ed25519.PrivateKey, a *peer, token string)
	}{
		{"pairing request replaced by a newer connection", false, func(e *closeEnv, key ed25519.PrivateKey, a *peer, _ string) {
			if _, st := e.hello(key, e.invite); st != "pending" {
				e.t.Errorf("newer connection: status %q", st)
			}
		}},
		{"paired connection replaced by a newer one", true, func(e *closeEnv, key ed25519.PrivateKey, a *peer, token string) {
			if _, st := e.hello(key, token); st != "paired" {
				e.t.Errorf("newer connection: status %q", st)
			}
		}},
		{"pairing request rejected", false, func(e *closeEnv, _ ed25519.PrivateKey, a *peer, _ string) {
			if _, err := e.h.Remove(a.id); err != nil {
				e.t.Error(err)
			}
		}},
		{"paired node removed", true, func(e *closeEnv, _ ed25519.PrivateKey, a *peer, _ string) {
			if _, err := e.h.Remove(a.id); err != nil {
				e.t.Error(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newCloseEnv(t)
			keyA := newKey()
			a, st := e.hello(keyA, e.invite)
			if st != "pending" {
				t.Fatalf("silent peer: status %q", st)
			}
			e.waitFor("the request to wait", func() bool { return e.h.waiting[a.id] != nil })
			token := ""
			if tc.paired {
				if _, err := e.h.Approve(a.id); err != nil {
					t.Fatal(err)
				}
				var p struct{ NodeToken string }
				json.Unmarshal(a.read(e, "event").Payload, &p)
				token = p.NodeToken
				e.waitFor("the node to be connected", func() bool { return e.h.conns[a.id] != nil })
			}
			// From here on a reads nothing: it never answers a close.
			c, st := e.hello(newKey(), e.invite)
			if st != "pending" {
				t.Fatalf("other node: status %q", st)
			}
			e.waitFor("the other request to wait", func() bool { return e.h.waiting[c.id] != nil })

			triggered := make(chan struct{})
			go func() { defer close(triggered); tc.trigger(e, keyA, a, token) }()
			select {
			case <-a.tap.closeSent:
			case <-e.ctx.Done():
				t.Fatal("the hub never started closing the silent peer")
			}
			// The handshake now waits for a's answer, which never comes:
			// only its timeout ends it (a.tap.closed). Every operation
			// must return before that.
			ops := []struct {
				name string
				f    func() error
			}{
				{"trigger", func() error { <-triggered; return nil }},
				{"List", func() error { _, err := e.h.List(); return err }},
				{"Overview", func() error { _, err := e.h.Overview(); return err }},
				{"Connected", func() error { e.h.Connected(); return nil }},
				{"Select", func() error { e.h.Select(""); return nil }},
				{"Invite", func() error { _, err := e.h.Invite(time.Hour, true); return err }},
				{"Approve another node", func() error { _, err := e.h.Approve(c.id); return err }},
			}
			for _, op := range ops {
				done := make(chan error, 1)
				go func() { done <- op.f() }()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("%s: %v", op.name, err)
					}
				case <-a.tap.closed:
					t.Fatalf("%s waited for the close handshake of a peer that never answers", op.name)
				}
			}
			// The other node got its token.
			var p struct{ NodeToken string }
			json.Unmarshal(c.read(e, "event").Payload, &p)
			if !strings.HasPrefix(p.NodeToken, "cnt_") {
				t.Errorf("other node: token %q", p.NodeToken)
			}
			// And the silent peer's connection does end.
			select {
			case <-a.tap.closed:
			case <-e.ctx.Done():
				t.Fatal("the silent peer's connection was never closed")
			}
		})
	}
}
