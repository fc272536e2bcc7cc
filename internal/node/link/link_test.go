package link

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/conchsh/conch/apitype"
)

// server runs Accept with admit on a loopback HTTP server and returns the
// link URL.
func server(t *testing.T, admit Admit) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { Accept(w, r, admit) }))
	t.Cleanup(srv.Close)
	u, _, err := ConnectURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestRefusals: the admit function's refusal reaches the dialler as
// ErrUnauthorized (401) or as another error (503), and the token it saw
// is the bearer's.
func TestRefusals(t *testing.T) {
	ctx := testCtx(t)
	var seen string
	u := server(t, func(tok string) (func(*Conn), error) {
		seen = tok
		if tok == "down" {
			return nil, errors.New("pairing state unreadable")
		}
		return nil, ErrUnauthorized
	})
	_, err := Dial(ctx, u, DialOptions{Token: "cnt_x"})
	if !errors.Is(err, ErrUnauthorized) || seen != "cnt_x" {
		t.Fatalf("bad token: %v (token seen %q)", err, seen)
	}
	_, err = Dial(ctx, u, DialOptions{Token: "down"})
	if err == nil || errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("unavailable: %v", err)
	}
}

// TestFramesBothWays: frames and output cross the link in both
// directions in order, a text message that is not JSON is ErrBadFrame and
// the link stays usable, and a close code reaches the other side.
func TestFramesBothWays(t *testing.T) {
	ctx := testCtx(t)
	got := make(chan error, 1)
	u := server(t, func(tok string) (func(*Conn), error) {
		return func(c *Conn) {
			got <- func() error {
				if c.RemoteIP() != "127.0.0.1" {
					return errors.New("remote IP " + c.RemoteIP())
				}
				f, err := c.ReadFrame(ctx)
				if err != nil || f.Method != "node.hello" {
					return errors.New("hello: " + f.Method)
				}
				if _, err := c.ReadFrame(ctx); !errors.Is(err, ErrBadFrame) {
					return errors.New("want ErrBadFrame")
				}
				bin, b, err := c.Read(ctx)
				if err != nil || !bin {
					return errors.New("want a binary message")
				}
				o, err := apitype.DecodeNodeOutput(b)
				if err != nil || string(o.Data) != "out" || o.Cursor != 3 {
					return errors.New("bad output")
				}
				if err := c.Send(ctx, apitype.Frame{Type: "res", ID: "1", OK: true}); err != nil {
					return err
				}
				return c.Close(CloseRevoked, "node removed")
			}()
		}, nil
	})
	c, err := Dial(ctx, u, DialOptions{Token: "cnt_x"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Send(ctx, apitype.Frame{Type: "req", ID: "h", Method: "node.hello"}); err != nil {
		t.Fatal(err)
	}
	if err := c.write(ctx, websocket.MessageText, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if err := c.SendOutput(ctx, apitype.NodeOutput{SessionID: "s", Stream: "stdout", Cursor: 3, Data: []byte("out")}); err != nil {
		t.Fatal(err)
	}
	f, err := c.ReadFrame(ctx)
	if err != nil || f.ID != "1" || !f.OK {
		t.Fatalf("answer: %+v %v", f, err)
	}
	_, err = c.ReadFrame(ctx)
	if CloseCodeOf(err) != CloseRevoked {
		t.Fatalf("close: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestKeepaliveSilentPeer: a peer that stops reading (so never answers a
// ping) is detected within a few intervals and
// its link is closed.
func TestKeepaliveSilentPeer(t *testing.T) {
	ctx := testCtx(t)
	res := make(chan error, 1)
	u := server(t, func(tok string) (func(*Conn), error) {
		return func(c *Conn) {
			res <- c.Keepalive(ctx, 50*time.Millisecond)
			_, _, err := c.Read(ctx)
			res <- err
		}, nil
	})
	c, err := Dial(ctx, u, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	// c never reads: its pongs are never sent.
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("Keepalive returned nil for a silent peer")
		}
	case <-ctx.Done():
		t.Fatal("Keepalive never gave up on a silent peer")
	}
	if err := <-res; err == nil {
		t.Fatal("the link is still up after a failed keepalive")
	}
}

func TestConnectURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://gw:7878":   "ws://gw:7878/v1/nodes/connect",
		"https://gw/":      "wss://gw/v1/nodes/connect",
		"ws://gw/base":     "ws://gw/base/v1/nodes/connect",
		"wss://gw:1/x/":    "wss://gw:1/x/v1/nodes/connect",
		"ftp://gw":         "",
		"gw:7878":          "",
		"http://":          "",
		"https://[::1]:99": "wss://[::1]:99/v1/nodes/connect",
	} {
		got, tlsOn, err := ConnectURL(in)
		if (err != nil) != (want == "") || got != want || (err == nil && tlsOn != strings.HasPrefix(want, "wss:")) {
			t.Errorf("ConnectURL(%q) = %q, %v, %v; want %q", in, got, tlsOn, err, want)
		}
	}
}
