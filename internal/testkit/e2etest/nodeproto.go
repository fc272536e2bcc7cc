package e2etest

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/conchsh/conch/apitype"
)

// HandHello dials the node endpoint with join token tok, answers the
// challenge with a hello for pub signed by key (mutate, if set, edits it
// first), and returns the close status, or 0 when the gateway accepted it
// (a pairing request).
func HandHello(t testing.TB, g *Gateway, tok string, pub ed25519.PublicKey, key ed25519.PrivateKey, name string, mutate func(h *apitype.NodeHello, nonce string)) websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(g.Base, "http://", "ws://", 1)+"/v1/nodes/connect",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var f apitype.Frame
	var ch struct{ Nonce string }
	json.Unmarshal(b, &f)
	json.Unmarshal(f.Payload, &ch)
	h := apitype.NodeHello{NodeID: apitype.NodeIDOf(pub), PublicKey: base64.StdEncoding.EncodeToString(pub),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, apitype.NodeHelloMessage(ch.Nonce))), Name: name, Caps: []string{"system.run"}}
	if mutate != nil {
		mutate(&h, ch.Nonce)
	}
	hb, _ := json.Marshal(h)
	fb, _ := json.Marshal(apitype.Frame{Type: "req", ID: "1", Method: "node.hello", Params: hb})
	c.Write(ctx, websocket.MessageText, fb)
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return websocket.CloseStatus(err)
		}
		json.Unmarshal(b, &f)
		if f.Type == "res" && f.OK {
			return 0
		}
	}
}
