// Package link is the WebSocket transport of node hosts, both sides:
// the gateway accepting a node's connection (Accept, for the HTTP adapter's
// GET /v1/nodes/connect) and a node dialling its gateway (Dial). A link
// carries apitype frames as JSON text messages and session output as
// binary messages (apitype.EncodeNodeOutput); it keeps itself alive with
// pings and ends with a close handshake of bounded length. It knows nothing
// of pairing or sessions: internal/node/hub and internal/node/agent do.
//
// It is the only package besides the HTTP adapters that imports the
// WebSocket library.
package link

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/conchsh/conch/apitype"
)

// MaxFrame is the largest frame either side sends. The
// gateway reads messages of up to MaxFrame plus a little framing; a node
// reads up to DialReadLimit.
const MaxFrame = 4 << 20

// DialReadLimit is the largest message a node reads from its gateway.
const DialReadLimit = 8 << 20

// CloseCode is the status code of a close handshake.
type CloseCode int

// Close codes of node links.
const (
	CloseGoingAway       CloseCode = CloseCode(websocket.StatusGoingAway)
	ClosePolicyViolation CloseCode = CloseCode(websocket.StatusPolicyViolation)
	// CloseAuth: the node's identity or hello was refused.
	CloseAuth CloseCode = 4401
	// CloseRevoked: the node was removed or its pairing rejected.
	CloseRevoked CloseCode = 4403
)

// CloseCodeOf returns the code the peer closed the link with, or -1 when
// err is not the end of a close handshake.
func CloseCodeOf(err error) CloseCode { return CloseCode(websocket.CloseStatus(err)) }

// ErrUnauthorized is the refusal of a node's bearer token: Accept answers
// it with 401; Dial returns it (wrapped) when the gateway did.
var ErrUnauthorized = errors.New("invalid node token")

// ErrBadFrame wraps the error of a text message that is not a JSON frame.
var ErrBadFrame = errors.New("bad frame")

// Conn is one node link. Its methods are safe for concurrent use; writes
// are serialised (a frame is never interleaved with another).
type Conn struct {
	ws       *websocket.Conn
	remoteIP string
	podToken string
	wmu      sync.Mutex // serialises writes
}

// RemoteIP is the address the node connected from (gateway side), or "".
func (c *Conn) RemoteIP() string { return c.remoteIP }

// PodTokenHeader carries, on a sandbox pod's first connection, the pod's
// projected service-account token: the gateway verifies it (TokenReview)
// against the pod its join token was minted for (the kubernetes sandbox
// backend).
const PodTokenHeader = "X-Conch-Pod-Token"

// PodToken is the PodTokenHeader the node sent (gateway side), or "".
func (c *Conn) PodToken() string { return c.podToken }

// Read returns the next message: binary reports a binary one (session
// output), else it is a text message (a JSON frame).
func (c *Conn) Read(ctx context.Context) (binary bool, data []byte, err error) {
	typ, b, err := c.ws.Read(ctx)
	if err != nil {
		return false, nil, err
	}
	return typ == websocket.MessageBinary, b, nil
}

// ReadFrame reads the next message as a JSON frame. A message that does
// not decode gives an error wrapping ErrBadFrame; the link stays usable.
func (c *Conn) ReadFrame(ctx context.Context) (apitype.Frame, error) {
	var f apitype.Frame
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	return f, nil
}

// Send writes f as a text message.
func (c *Conn) Send(ctx context.Context, f apitype.Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return c.write(ctx, websocket.MessageText, b)
}

// SendOutput writes a chunk of session output as a binary message
// (apitype.EncodeNodeOutput).
func (c *Conn) SendOutput(ctx context.Context, o apitype.NodeOutput) error {
	return c.write(ctx, websocket.MessageBinary, apitype.EncodeNodeOutput(o))
}

func (c *Conn) write(ctx context.Context, typ websocket.MessageType, b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.Write(ctx, typ, b)
}

// Keepalive pings the peer every interval until ctx ends (then it returns
// nil). A ping the peer does not answer within three intervals ends the
// link at once (CloseNow) and is returned. Pongs are read by whoever reads
// the link: Keepalive needs a concurrent reader.
func (c *Conn) Keepalive(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 3*every)
		err := c.ws.Ping(pctx)
		cancel()
		if err != nil {
			c.ws.CloseNow()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// Close ends the link with a close handshake: it sends code and reason and
// waits for the peer's answer. It is bounded: 5 s to send, 5 s for the
// answer, then the connection is closed anyway; so a caller that must not
// wait for a peer (one holding a lock) runs it in a goroutine. Only the
// first Close or CloseNow of a link acts.
func (c *Conn) Close(code CloseCode, reason string) error {
	return c.ws.Close(websocket.StatusCode(code), reason)
}

// CloseNow closes the connection without a handshake (it still waits for
// a handshake already under way).
func (c *Conn) CloseNow() error { return c.ws.CloseNow() }

// Admit decides, from the bearer token of a node's connection request,
// whether it is upgraded to a link. It returns the function that serves
// the link (and returns when the link ends), or an error: one wrapping
// ErrUnauthorized is answered 401, any other 503; the error's text is the
// answer's body.
type Admit func(token string) (serve func(*Conn), err error)

// Accept serves a node's GET /v1/nodes/connect: it asks admit about the
// bearer token, upgrades the request to a link and runs the serve function
// admit returned until the link ends. The caller (the HTTP adapter) has
// done nothing but route the request: nodes authenticate with their own
// tokens and may dial any name of the gateway.
func Accept(w http.ResponseWriter, r *http.Request, admit Admit) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	serve, err := admit(strings.TrimSpace(tok))
	if err != nil {
		status := http.StatusServiceUnavailable
		if errors.Is(err, ErrUnauthorized) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			status = http.StatusUnauthorized
		}
		http.Error(w, err.Error(), status)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept answered the request
	}
	ws.SetReadLimit(MaxFrame + 4096)
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	serve(&Conn{ws: ws, remoteIP: ip, podToken: strings.TrimSpace(r.Header.Get(PodTokenHeader))})
}

// DialOptions configure Dial.
type DialOptions struct {
	// Token is the bearer token: a node token, or a join token.
	Token string
	// TLS configures a wss:// link (nil: the system's roots).
	TLS *tls.Config
	// PodToken, for a sandbox pod of the kubernetes backend, is its
	// service-account token, sent with its join token (PodTokenHeader).
	PodToken string
}

// Dial connects to a gateway's connect URL (ConnectURL). A gateway that
// refused the token gives an error wrapping ErrUnauthorized. ctx bounds
// the dial only, not the link.
func Dial(ctx context.Context, url string, opt DialOptions) (*Conn, error) {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: opt.TLS, Proxy: http.ProxyFromEnvironment}}
	hdr := http.Header{"Authorization": {"Bearer " + opt.Token}}
	if opt.PodToken != "" {
		hdr.Set(PodTokenHeader, opt.PodToken)
	}
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: hdr})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("%w: %v", ErrUnauthorized, err)
		}
		return nil, err
	}
	ws.SetReadLimit(DialReadLimit)
	return &Conn{ws: ws}, nil
}

// ConnectURL turns a gateway base URL (http, https, ws or wss) into the
// link's URL; useTLS reports a wss:// one.
func ConnectURL(base string) (link string, useTLS bool, err error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || u.Host == "" {
		return "", false, fmt.Errorf("bad --gateway %q", base)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme, useTLS = "wss", true
	default:
		return "", false, fmt.Errorf("bad --gateway %q: use http://, https://, ws:// or wss://", base)
	}
	u.Path += "/v1/nodes/connect"
	return u.String(), useTLS, nil
}

// TLSConfig builds the client TLS configuration of a node's --ca: a CA
// bundle, or a single non-CA certificate, which is then pinned. "" gives
// the system's roots.
func TLSConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caFile, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate", caFile)
	}
	if len(certs) == 1 && !certs[0].IsCA {
		pinned := certs[0].Raw
		cfg.InsecureSkipVerify = true // replaced by the pin check below
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || string(cs.PeerCertificates[0].Raw) != string(pinned) {
				return errors.New("gateway certificate does not match the pinned certificate")
			}
			return nil
		}
		return cfg, nil
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	cfg.RootCAs = pool
	return cfg, nil
}
