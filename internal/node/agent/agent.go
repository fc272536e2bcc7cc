// Package agent is the node side of node hosts: the
// identity and token files, the outbound link to the gateway
// (internal/node/link) with reconnection, and the handlers of the gateway's
// requests over a local engine whose home (policy, journals, supervisors)
// is the node's own. The engine is an interface (Engine) and the functions
// it needs besides are passed in Options: it never imports the engine.
package agent

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/supervisor/proto"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/guard"
	"github.com/conchsh/conch/internal/config"
	nodelink "github.com/conchsh/conch/internal/node/link"
	"github.com/conchsh/conch/internal/node/port"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/store/approvals"
)

// Engine is the node's local engine as the node host uses it: it runs
// the gateway's requests on the node's own home, under its own policy.
type Engine interface {
	// JudgeLocal judges a command under the node's policy, with the
	// gateway's security and ask applied (system.run.prepare).
	JudgeLocal(agent, security, ask, raw, cwd string) (port.Judgement, error)
	// Closed reports whether the engine is closing.
	Closed() bool
	// ReserveLocal creates session id's directory for StartLocal;
	// release removes it unless the run started.
	ReserveLocal(id string) (release func(started bool), err error)
	// StartLocal starts a checked run as a session (system.run).
	StartLocal(r port.LocalRun) (pid int, err error)
	// PersistAllow adds patterns to agent's allowlist (allow-always).
	PersistAllow(agent string, patterns []string, command, runID string)
	// NodeSession returns the directory of session id and a channel
	// closed at its next change; ok is false for an unknown id.
	NodeSession(id string) (dir string, changed <-chan struct{}, ok bool)
	// NodeEnd returns the final end state of session id once it has
	// one (ended is false before), and its command.
	NodeEnd(id string) (ex proto.Exit, command string, ended bool)
	// NodeCall forwards a control request (system.session.*) to the
	// session's supervisor.
	NodeCall(id string, req proto.Request) (proto.Reply, error)
	// Config is the node's configuration (workspaces, apply_patch).
	Config() *config.Config
}

// Options configure Run.
type Options struct {
	Engine Engine
	// ApplyPatch applies a patch to a directory of this machine
	// (system.patch.apply); required.
	ApplyPatch func(ctx context.Context, input, workspace string, workspaceOnly bool) apitype.Result
	// SetApprovals replaces the node's approvals file with f if it still
	// has hash baseHash (an error wrapping approvals.ErrConflict if not)
	// and records the change in the node's ledger, by actor by
	// (system.execApprovals.set); required. conch node passes the
	// operator use case of internal/admin.
	SetApprovals func(home string, f *approvals.File, baseHash, by string) error
	Home         string
	Gateway      string // http(s):// or ws(s):// base URL; "" = the one in node.json
	Token        string // join token (first run) or node token
	Name         string
	CA           string // PEM: a CA bundle, or the gateway's certificate (pinned)
	Version      string
	// Ping is the keepalive interval (default 30 s).
	Ping   time.Duration
	Logger *slog.Logger
	// Out receives the messages for the operator (pairing progress).
	Out io.Writer
	// PodTokenFile, for a sandbox pod of the kubernetes backend, is its
	// projected service-account token: sent with the join token, it proves
	// the pod the token is bound to (apitype.PodTokenHeader).
	PodTokenFile string
}

// ErrFatal wraps errors after which reconnecting is pointless.
var ErrFatal = errors.New("fatal")

// State is node/node.json.
type State struct {
	Gateway   string `json:"gateway"`
	NodeID    string `json:"nodeId"`
	Name      string `json:"name,omitempty"`
	NodeToken string `json:"nodeToken,omitempty"`
}

func statePath(home string) string { return filepath.Join(home, "node", "node.json") }

// LoadIdentity reads (or creates, 0600) the node's Ed25519 key.
func LoadIdentity(home string) (ed25519.PrivateKey, error) {
	path := filepath.Join(home, "node", "identity.key")
	if b, err := os.ReadFile(path); err == nil {
		blk, _ := pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("%s: not PEM", path)
		}
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pk, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: not an Ed25519 key", path)
		}
		return pk, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	_, pk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(pk)
	if err != nil {
		return nil, err
	}
	// The key appears whole or not at all: a half-written key would be
	// refused at every later start.
	if err := fsutil.CreateFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		if errors.Is(err, os.ErrExist) {
			return LoadIdentity(home) // another process made it first
		}
		return nil, err
	}
	return pk, nil
}

func loadState(home string) State {
	var st State
	fsutil.ReadJSON(statePath(home), &st)
	return st
}

func saveState(home string, st State) error {
	if err := os.MkdirAll(filepath.Dir(statePath(home)), 0o700); err != nil {
		return err
	}
	return fsutil.WriteJSONDurable(statePath(home), st)
}

// Run connects to the gateway and serves it until ctx ends or a fatal
// error (token refused, node removed), reconnecting with backoff.
func Run(ctx context.Context, opt Options) error {
	if opt.Engine == nil || opt.ApplyPatch == nil || opt.SetApprovals == nil {
		return fmt.Errorf("%w: nodehost.Options needs Engine, ApplyPatch and SetApprovals", ErrFatal)
	}
	if opt.Ping <= 0 {
		opt.Ping = 30 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Out == nil {
		opt.Out = io.Discard
	}
	key, err := LoadIdentity(opt.Home)
	if err != nil {
		return fmt.Errorf("%w: node identity: %v", ErrFatal, err)
	}
	st := loadState(opt.Home)
	pub := key.Public().(ed25519.PublicKey)
	st.NodeID = apitype.NodeIDOf(pub)
	if opt.Gateway != "" && opt.Gateway != st.Gateway {
		if st.Gateway != "" && opt.Token == "" {
			return fmt.Errorf("%w: node is paired with %s; pass --token to pair with %s", ErrFatal, st.Gateway, opt.Gateway)
		}
		if st.Gateway != "" {
			st.NodeToken = ""
		}
		st.Gateway = opt.Gateway
	}
	if strings.HasPrefix(opt.Token, "cnt_") {
		st.NodeToken = opt.Token
	}
	if opt.Name != "" {
		st.Name = opt.Name
	}
	if st.Name == "" {
		st.Name, _ = os.Hostname()
	}
	if st.Gateway == "" {
		return fmt.Errorf("%w: no gateway: pass --gateway URL", ErrFatal)
	}
	if st.NodeToken == "" && !strings.HasPrefix(opt.Token, "cnj_") {
		return fmt.Errorf("%w: not paired yet: pass --token cnj_… (from conch nodes invite)", ErrFatal)
	}
	if err := saveState(opt.Home, st); err != nil {
		return fmt.Errorf("%w: %v", ErrFatal, err)
	}
	wsURL, tlsOn, err := nodelink.ConnectURL(st.Gateway)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFatal, err)
	}
	var tcfg *tls.Config
	if tlsOn {
		if tcfg, err = nodelink.TLSConfig(opt.CA); err != nil {
			return fmt.Errorf("%w: --ca: %v", ErrFatal, err)
		}
	}
	n := &node{opt: opt, key: key, pub: pub, st: st, wsURL: wsURL, tls: tcfg, streams: map[string]context.CancelFunc{}}
	// Backoff 1 s doubling to 30 s; a short keepalive (tests, fast
	// links) starts it lower.
	first := min(time.Second, max(opt.Ping, 100*time.Millisecond))
	backoff := first
	for {
		ok, err := n.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrFatal) {
			return err
		}
		if ok {
			backoff = first
		}
		opt.Logger.Warn("gateway connection ended; reconnecting", "err", err, "in", backoff)
		d := backoff + time.Duration(mrand.Int64N(int64(backoff/4)+1))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

type node struct {
	opt   Options
	key   ed25519.PrivateKey
	pub   ed25519.PublicKey
	st    State
	wsURL string
	tls   *tls.Config

	smu     sync.Mutex // guards streams
	streams map[string]context.CancelFunc

	plans plans // the run plans prepared for the gateway (run.go)
}

// link is one connection to the gateway.
type link struct {
	c   *nodelink.Conn
	ctx context.Context // ends with the connection
}

func (l *link) send(f apitype.Frame) error { return l.c.Send(l.ctx, f) }

// output sends an exec.output event as a binary message.
func (l *link) output(o apitype.NodeOutput) error { return l.c.SendOutput(l.ctx, o) }

func (l *link) event(name string, payload any) error {
	b, _ := json.Marshal(payload)
	return l.send(apitype.Frame{Type: "event", Event: name, Payload: b})
}

func (l *link) reply(id string, payload any, aerr *apitype.Error) error {
	if aerr != nil {
		return l.send(apitype.Frame{Type: "res", ID: id, Error: aerr})
	}
	b, _ := json.Marshal(payload)
	return l.send(apitype.Frame{Type: "res", ID: id, OK: true, Payload: b})
}

var caps = []string{"system.run", "system.run.stream", "pty", "system.session", "system.which", "system.execApprovals", "system.patch"}

// session runs one connection; ok reports that the hello succeeded.
func (n *node) session(ctx context.Context) (ok bool, err error) {
	tok := n.st.NodeToken
	if tok == "" {
		tok = n.opt.Token
	}
	dctx, dcancel := context.WithTimeout(ctx, min(15*time.Second, max(2*time.Second, 3*n.opt.Ping)))
	dopt := nodelink.DialOptions{Token: tok, TLS: n.tls}
	if n.opt.PodTokenFile != "" && strings.HasPrefix(tok, "cnj_") {
		b, err := os.ReadFile(n.opt.PodTokenFile)
		if err != nil {
			dcancel()
			return false, fmt.Errorf("read the pod's service-account token: %v", err)
		}
		dopt.PodToken = strings.TrimSpace(string(b))
	}
	ws, err := nodelink.Dial(dctx, n.wsURL, dopt)
	dcancel()
	if err != nil {
		if errors.Is(err, nodelink.ErrUnauthorized) {
			if strings.HasPrefix(tok, "cnt_") {
				return false, fmt.Errorf("%w: the gateway refused this node's token (was the node removed?)", ErrFatal)
			}
			return false, fmt.Errorf("%w: the gateway refused the join token (unknown, expired or already used)", ErrFatal)
		}
		return false, err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := &link{c: ws, ctx: cctx}
	defer ws.CloseNow()
	defer n.stopStreams()
	fatalClose := func(err error) error {
		switch nodelink.CloseCodeOf(err) {
		case nodelink.CloseAuth:
			return fmt.Errorf("%w: the gateway refused this node's identity (%v)", ErrFatal, err)
		case nodelink.CloseRevoked:
			return fmt.Errorf("%w: this node was removed or its pairing rejected by the gateway", ErrFatal)
		}
		return err
	}
	read := func() (apitype.Frame, error) {
		f, err := ws.ReadFrame(cctx)
		if err != nil && !errors.Is(err, nodelink.ErrBadFrame) {
			return f, fatalClose(err)
		}
		return f, err
	}
	f, err := read()
	if err != nil {
		return false, err
	}
	var ch struct{ Nonce string }
	if f.Event != "connect.challenge" || json.Unmarshal(f.Payload, &ch) != nil {
		return false, errors.New("expected connect.challenge")
	}
	hello := apitype.NodeHello{
		NodeID: n.st.NodeID, PublicKey: base64.StdEncoding.EncodeToString(n.pub),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(n.key, apitype.NodeHelloMessage(ch.Nonce))),
		Name:      n.st.Name, Platform: runtime.GOOS, Arch: runtime.GOARCH, Version: n.opt.Version, Caps: caps,
	}
	hb, _ := json.Marshal(hello)
	if err := l.send(apitype.Frame{Type: "req", ID: "hello", Method: "node.hello", Params: hb}); err != nil {
		return false, err
	}
	if f, err = read(); err != nil {
		return false, err
	}
	if !f.OK {
		msg := "hello refused"
		if f.Error != nil {
			msg = f.Error.Message
		}
		return false, fmt.Errorf("%w: %s", ErrFatal, msg)
	}
	var hr apitype.NodeHelloReply
	json.Unmarshal(f.Payload, &hr)
	handle := func(f apitype.Frame) bool {
		switch {
		case f.Type == "event" && f.Event == "node.paired":
			var p struct{ NodeToken string }
			json.Unmarshal(f.Payload, &p)
			if p.NodeToken != "" {
				n.st.NodeToken = p.NodeToken
				if err := saveState(n.opt.Home, n.st); err != nil {
					n.opt.Logger.Error("save node token", "err", err)
				}
				fmt.Fprintf(n.opt.Out, "conch node: paired as %s (%s)\n", n.st.NodeID, n.st.Name)
			}
			return true
		case f.Type == "event" && f.Event == "node.rejected":
			return false
		}
		return true
	}
	if hr.Status == "pending" {
		fmt.Fprintf(n.opt.Out, "conch node: pairing requested (node %s, request %s); approve it on the gateway: conch nodes approve %s\n", n.st.NodeID, hr.RequestID, n.st.NodeID)
		for n.st.NodeToken == "" || !strings.HasPrefix(n.st.NodeToken, "cnt_") {
			f, err := read()
			if err != nil {
				return false, err
			}
			if !handle(f) {
				return false, fmt.Errorf("%w: the gateway rejected the pairing request", ErrFatal)
			}
		}
	}
	fmt.Fprintf(n.opt.Out, "conch node: connected to %s as %s\n", n.st.Gateway, n.st.NodeID)
	go func() {
		if err := ws.Keepalive(cctx, n.opt.Ping); err != nil {
			n.opt.Logger.Info("gateway keepalive failed", "err", err)
			cancel()
		}
	}()
	for {
		f, err := ws.ReadFrame(cctx)
		if errors.Is(err, nodelink.ErrBadFrame) {
			continue
		}
		if err != nil {
			return true, fatalClose(err)
		}
		if f.Type == "event" {
			if !handle(f) {
				return true, fmt.Errorf("%w: rejected", ErrFatal)
			}
			continue
		}
		if f.Type == "req" {
			go n.request(l, f)
		}
	}
}

// checkParams validates the numbers (against their declared ranges) and
// strings (no NUL) of a request's params.
func checkParams(p any) *apitype.Error {
	e := apitype.CheckRanges(p, "")
	if e == nil {
		e = apitype.CheckStrings(p)
	}
	if e != nil {
		return invalid(e.Message)
	}
	return nil
}

// decodeParams decodes a request's params into v and checks them
// (checkParams): a failure is the request's INVALID_REQUEST answer, with
// the reason.
func decodeParams(raw json.RawMessage, v any) *apitype.Error {
	if err := json.Unmarshal(raw, v); err != nil {
		return invalid("bad params: " + err.Error())
	}
	return checkParams(v)
}

func invalid(msg string) *apitype.Error {
	return &apitype.Error{Code: apitype.NodeInvalidRequest, Message: apitype.NodeInvalidRequest + ": " + msg}
}

// request handles one gateway request.
func (n *node) request(l *link, f apitype.Frame) {
	defer n.recoverRequest(l, f)
	switch {
	case f.Method == "system.run.prepare":
		n.prepareRequest(l, f)
	case f.Method == "system.run":
		n.runRequest(l, f)
	case f.Method == "system.session.read":
		n.readRequest(l, f)
	case strings.HasPrefix(f.Method, "system.session."):
		n.sessionRequest(l, f)
	case f.Method == "system.patch.apply":
		n.patchRequest(l, f)
	case f.Method == "system.which":
		n.whichRequest(l, f)
	case f.Method == "system.execApprovals.get":
		n.getApprovalsRequest(l, f)
	case f.Method == "system.execApprovals.set":
		n.setApprovalsRequest(l, f)
	default:
		l.reply(f.ID, nil, invalid("unknown method "+f.Method))
	}
}

// recoverRequest, deferred by request: a panic answers the request with
// an error; the node stays up.
func (n *node) recoverRequest(l *link, f apitype.Frame) {
	if v := recover(); v != nil {
		p := guard.Recovered("nodehost", n.opt.Logger, v)
		l.reply(f.ID, nil, &apitype.Error{Code: apitype.NodeUnavailable, Message: p.Error()})
	}
}

// prepareRequest answers system.run.prepare: judge a command and keep its plan.
func (n *node) prepareRequest(l *link, f apitype.Frame) {
	var p apitype.NodePrepareParams
	if e := decodeParams(f.Params, &p); e != nil {
		l.reply(f.ID, nil, e)
		return
	}
	rep, aerr := n.prepare(p)
	l.reply(f.ID, rep, aerr)
}

// runRequest answers system.run: start a prepared run, then stream its output.
func (n *node) runRequest(l *link, f apitype.Frame) {
	var p apitype.NodeRunParams
	if e := decodeParams(f.Params, &p); e != nil {
		l.reply(f.ID, nil, e)
		return
	}
	if !p.Stream {
		l.reply(f.ID, nil, invalid("this node runs streamed sessions only (stream:true)"))
		return
	}
	rep, aerr := n.run(p)
	if l.reply(f.ID, rep, aerr) != nil || aerr != nil {
		return
	}
	n.stream(l, p.SessionID, p.RunID, p.RawCommand, 0)
}

// readRequest answers system.session.read: stream a session's output from since.
func (n *node) readRequest(l *link, f apitype.Frame) {
	eng := n.opt.Engine
	var p apitype.NodeSessionParams
	if e := decodeParams(f.Params, &p); e != nil {
		l.reply(f.ID, nil, e)
		return
	}
	if _, _, ok := eng.NodeSession(p.SessionID); !ok {
		l.reply(f.ID, nil, invalid("No session found for "+p.SessionID))
		return
	}
	if l.reply(f.ID, map[string]any{"sessionId": p.SessionID}, nil) != nil {
		return
	}
	n.stream(l, p.SessionID, "", "", p.Since)
}

// sessionRequest answers system.session.*: forward a control request to the session's supervisor.
func (n *node) sessionRequest(l *link, f apitype.Frame) {
	eng := n.opt.Engine
	var p apitype.NodeSessionParams
	var req proto.Request
	e := decodeParams(f.Params, &p)
	if e == nil {
		e = decodeParams(p.Request, &req)
	}
	if e != nil {
		l.reply(f.ID, nil, e)
		return
	}
	req.Op = strings.TrimPrefix(f.Method, "system.session.")
	rep, err := eng.NodeCall(p.SessionID, req)
	if err != nil {
		rep = proto.Reply{Error: err.Error()}
	}
	l.reply(f.ID, rep, nil)
}

// patchRequest answers system.patch.apply: apply a patch in the agent's workspace on this node.
func (n *node) patchRequest(l *link, f apitype.Frame) {
	eng := n.opt.Engine
	var p struct {
		AgentID string `json:"agentId"`
		Input   string `json:"input"`
	}
	if e := decodeParams(f.Params, &p); e != nil {
		l.reply(f.ID, nil, e)
		return
	}
	// This node's workspace for the agent and its own workspaceOnly.
	cfg := eng.Config()
	ws := cfg.Exec(p.AgentID).Workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
	res := n.opt.ApplyPatch(ctx, p.Input, ws, cfg.ApplyPatch(p.AgentID).WorkspaceOnly)
	cancel()
	l.reply(f.ID, res, nil)
}

// whichRequest answers system.which: where this node finds the named programs.
func (n *node) whichRequest(l *link, f apitype.Frame) {
	var p struct{ Names []string }
	if e := decodeParams(f.Params, &p); e != nil {
		l.reply(f.ID, nil, e)
		return
	}
	paths := map[string]any{}
	for _, name := range p.Names {
		if pth, err := exec.LookPath(name); err == nil {
			paths[name] = pth
		} else {
			paths[name] = nil
		}
	}
	l.reply(f.ID, map[string]any{"paths": paths}, nil)
}

// getApprovalsRequest answers system.execApprovals.get: this node's approvals file.
func (n *node) getApprovalsRequest(l *link, f apitype.Frame) {
	af, err := approvals.Load(n.opt.Home)
	if err != nil {
		l.reply(f.ID, nil, &apitype.Error{Code: apitype.NodeInvalidRequest, Message: err.Error()})
		return
	}
	b, _ := json.Marshal(af)
	l.reply(f.ID, apitype.NodeApprovalsFile{Path: approvals.Path(n.opt.Home), Exists: af.Exists(), Hash: af.Hash(), File: b}, nil)
}

// setApprovalsRequest answers system.execApprovals.set: replace this node's approvals file.
func (n *node) setApprovalsRequest(l *link, f apitype.Frame) {
	var p apitype.NodeApprovalsSet
	if e := decodeParams(f.Params, &p); e != nil {
		l.reply(f.ID, nil, e)
		return
	}
	nf, err := approvals.Parse(p.File)
	if err != nil {
		l.reply(f.ID, nil, invalid(err.Error()))
		return
	}
	if err := n.opt.SetApprovals(n.opt.Home, nf, p.BaseHash, "gateway"); err != nil {
		if errors.Is(err, approvals.ErrConflict) {
			l.reply(f.ID, nil, &apitype.Error{Code: apitype.NodeApprovalsConflict, Message: apitype.NodeInvalidRequest + ": " + approvals.ErrConflict.Error()})
			return
		}
		l.reply(f.ID, nil, &apitype.Error{Code: apitype.NodeUnavailable, Message: err.Error()})
		return
	}
	l.reply(f.ID, map[string]string{"hash": nf.Hash()}, nil)
}

func (n *node) stopStreams() {
	n.smu.Lock()
	for id, c := range n.streams {
		c()
		delete(n.streams, id)
	}
	n.smu.Unlock()
}

// stream sends a session's journal from since as exec.output events and,
// once the session has ended and everything was sent, exec.finished. One
// stream per session: a new one (a resync) replaces the old.
func (n *node) stream(l *link, id, runID, command string, since int64) {
	ctx, cancel := context.WithCancel(l.ctx)
	n.smu.Lock()
	if old := n.streams[id]; old != nil {
		old()
	}
	n.streams[id] = cancel
	n.smu.Unlock()
	go func() {
		defer cancel()
		cur := since
		const batch = 1 << 20
		for {
			dir, changed, ok := n.opt.Engine.NodeSession(id)
			if !ok {
				return
			}
			// The end first, then the output up to it: what the
			// session wrote is all in its journal once it has ended.
			ex, cmd, ended := n.opt.Engine.NodeEnd(id)
			var buf []byte
			bufStream := ""
			flush := func() error {
				if len(buf) == 0 {
					return nil
				}
				err := l.output(apitype.NodeOutput{RunID: runID, SessionID: id, Stream: bufStream, Cursor: cur, Data: buf})
				buf = buf[:0]
				return err
			}
			end, err := proto.ReadOutput(dir, cur, func(c journal.Chunk) error {
				s := c.Stream.String()
				if c.Cursor != cur || s != bufStream || len(buf)+len(c.Data) > batch {
					if err := flush(); err != nil {
						return err
					}
				}
				bufStream = s
				buf = append(buf, c.Data...)
				cur = c.End()
				return ctx.Err()
			})
			if err == nil {
				err = flush()
			}
			if err != nil && ctx.Err() != nil {
				return
			}
			if end > cur {
				cur = end
			}
			if ended {
				raw, _ := json.Marshal(ex)
				if command == "" {
					command = cmd
				}
				success := ex.State == proto.StateExited && ex.ExitCode != nil && *ex.ExitCode == 0
				l.event("exec.finished", apitype.NodeFinished{RunID: runID, SessionID: id, Host: "node", Command: command,
					ExitCode: ex.ExitCode, TimedOut: ex.TimedOut, Success: success, State: ex.State, Signal: ex.Signal,
					KilledBy: ex.KilledBy, Cursor: cur, Exit: raw})
				n.smu.Lock()
				if n.streams[id] != nil {
					delete(n.streams, id)
				}
				n.smu.Unlock()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
}
