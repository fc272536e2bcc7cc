package hub

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/guard"
	nodelink "github.com/conchsh/conch/internal/node/link"
	"github.com/conchsh/conch/internal/node/port"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// Close codes (node/link's, named here for the hub's readers).
const (
	CloseAuth    = nodelink.CloseAuth
	CloseRevoked = nodelink.CloseRevoked
)

// Options configure a Hub.
type Options struct {
	Home string
	// Events receives node.* events for SSE (operators only).
	Events func(typ string, data any)
	// Ping is the keepalive interval (default 30 s); a peer that does not
	// answer within 3 pings is disconnected.
	Ping   time.Duration
	Logger *slog.Logger
}

// Hub accepts node connections and runs requests on them. It is safe for
// concurrent use.
type Hub struct {
	opt   Options
	store *Store
	log   *slog.Logger

	mu      sync.Mutex         // guards the maps
	pairMu  sync.Mutex         // orders an approval against a requester's registration in waiting
	conns   map[string]*conn   // paired, connected nodes by id
	waiting map[string]*conn   // connections of pending pairing requests
	mirrors map[string]*mirror // mirrored sessions by id
	closed  bool
	wg      sync.WaitGroup
	// closing runs the close handshakes of disconnect; Close waits for
	// them.
	closing group
	// podVerify checks sandbox pods' tokens (podpair.go).
	podVerify PodVerifier
}

var _ port.Hub = (*Hub)(nil)

// New opens the hub of opt.Home and restores the mirrors of sessions that
// were running on nodes when the gateway stopped. Call it before the
// engine reattaches its sessions.
func New(opt Options) (*Hub, error) {
	st, err := OpenStore(opt.Home)
	if err != nil {
		return nil, err
	}
	if opt.Ping <= 0 {
		opt.Ping = 30 * time.Second
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{opt: opt, store: st, log: log, conns: map[string]*conn{}, waiting: map[string]*conn{}, mirrors: map[string]*mirror{}}
	// Names an earlier conch let through (or a hand edit) that break the
	// naming rules are rewritten before any lookup reads them.
	var renamed []string
	if err := st.Update(func(s *State) error { renamed = s.fixNames(); return nil }); err != nil {
		// An unreadable state fails every lookup and pairing with its
		// error; the gateway still serves everything else.
		log.Warn("read node pairing state", "err", err)
	}
	for _, r := range renamed {
		log.Warn("node renamed: its name could be taken for another node's id or was not unique", "change", r)
	}
	h.restore()
	return h, nil
}

// Store returns the pairing store.
func (h *Hub) Store() *Store { return h.store }

func (h *Hub) emit(typ string, data any) {
	if h.opt.Events != nil {
		h.opt.Events(typ, data)
	}
}

// Close disconnects every node and stops the mirrors (their sessions keep
// running on the nodes).
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	var cs []*conn
	for _, c := range h.conns {
		cs = append(cs, c)
	}
	for _, c := range h.waiting {
		cs = append(cs, c)
	}
	ms := make([]*mirror, 0, len(h.mirrors))
	for _, m := range h.mirrors {
		ms = append(ms, m)
	}
	h.mu.Unlock()
	// Close handshakes in parallel: a dead link costs its timeout once.
	for _, c := range cs {
		h.disconnect(c, nodelink.CloseGoingAway, "gateway shutting down")
	}
	h.closing.wait()
	for _, m := range ms {
		m.stop()
	}
	h.wg.Wait()
}

// Connected counts connected paired nodes.
func (h *Hub) Connected() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// disconnect ends c with a close handshake in the background and returns
// at once: a peer that never answers the handshake (it may take ~10 s)
// holds neither the caller nor any lock the caller holds. Close waits for
// the handshakes under way.
func (h *Hub) disconnect(c *conn, code nodelink.CloseCode, reason string) {
	if !h.closing.run(func() { c.link.Close(code, reason) }) {
		// The hub is closing and waits no more: end the link without
		// the handshake (in the background: CloseNow waits for one
		// already under way).
		go c.link.CloseNow()
	}
}

// group runs functions in goroutines until wait is called; wait waits for
// them. Its zero value is ready.
type group struct {
	mu     sync.Mutex // guards closed and the Add of wg
	wg     sync.WaitGroup
	closed bool
}

// run starts f unless wait was called (then it reports false).
func (g *group) run(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// wait refuses further functions and waits for those running.
func (g *group) wait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// conn is one node connection.
type conn struct {
	h        *Hub
	link     *nodelink.Conn
	ctx      context.Context
	cancel   context.CancelFunc
	hello    apitype.NodeHello
	remoteIP string
	next     atomic.Int64
	cmu      sync.Mutex // guards calls
	calls    map[string]chan apitype.Frame
	// badFrames counts the frames refused (checkFrame and the rest):
	// the first few are logged.
	badFrames atomic.Int64
}

// refused logs node input that failed its check (the first few per
// connection: a flood must not flood the log).
func (c *conn) refused(what string, err error) {
	if n := c.badFrames.Add(1); n <= 20 {
		c.h.log.Warn("node sent invalid input; ignored", "node", c.hello.NodeID, "what", what, "err", err, "count", n)
	}
}

func (c *conn) send(f apitype.Frame) error {
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	return c.link.Send(ctx, f)
}

func (c *conn) event(name string, payload any) error {
	b, _ := json.Marshal(payload)
	return c.send(apitype.Frame{Type: "event", Event: name, Payload: b})
}

// call sends a request and waits for its response.
func (c *conn) call(ctx context.Context, method string, params any, timeout time.Duration) (json.RawMessage, *apitype.Error) {
	id := fmt.Sprintf("g%d", c.next.Add(1))
	ch := make(chan apitype.Frame, 1)
	c.cmu.Lock()
	if c.calls == nil {
		c.cmu.Unlock()
		return nil, apitype.Errorf(apitype.NodeUnavailable, "node %s disconnected", c.hello.NodeID)
	}
	c.calls[id] = ch
	c.cmu.Unlock()
	defer func() {
		c.cmu.Lock()
		if c.calls != nil {
			delete(c.calls, id)
		}
		c.cmu.Unlock()
	}()
	b, _ := json.Marshal(params)
	if err := c.send(apitype.Frame{Type: "req", ID: id, Method: method, Params: b}); err != nil {
		return nil, apitype.Errorf(apitype.NodeUnavailable, "node %s: %v", c.hello.NodeID, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f, ok := <-ch:
		if !ok {
			return nil, apitype.Errorf(apitype.NodeUnavailable, "node %s disconnected", c.hello.NodeID)
		}
		if !f.OK {
			if f.Error == nil {
				f.Error = apitype.Errorf(apitype.NodeUnavailable, "node error")
			}
			return nil, f.Error
		}
		if err := checkReply(method, f.Payload); err != nil {
			c.refused(method+" answer", err)
			return nil, apitype.Errorf(apitype.NodeUnavailable, "node %s sent an invalid answer to %s (%v)", c.hello.NodeID, method, err)
		}
		return f.Payload, nil
	case <-t.C:
		return nil, apitype.Errorf(apitype.NodeUnavailable, "node %s: %s timed out", c.hello.NodeID, method)
	case <-ctx.Done():
		return nil, apitype.Errorf(apitype.NodeUnavailable, "node %s: %v", c.hello.NodeID, ctx.Err())
	}
}

func (c *conn) failCalls() {
	c.cmu.Lock()
	for _, ch := range c.calls {
		close(ch)
	}
	c.calls = nil
	c.cmu.Unlock()
}

// Admit is the hub's side of GET /v1/nodes/connect, for
// nodelink.Accept: it authenticates the bearer token (a node token or a
// join token) and returns the function that checks the signed hello on
// the upgraded link and serves it until it ends.
func (h *Hub) Admit(tok string) (func(*nodelink.Conn), error) {
	st, err := h.store.Read()
	if err != nil {
		return nil, errors.New("pairing state unreadable")
	}
	hash := TokenHash(tok)
	var paired *Paired
	var invite *Invite
	now := time.Now().UnixMilli()
	switch {
	case strings.HasPrefix(tok, "cnt_"):
		for i := range st.Paired {
			if st.Paired[i].TokenHash == hash {
				paired = &st.Paired[i]
			}
		}
	case strings.HasPrefix(tok, "cnj_"):
		for i := range st.Invites {
			in := &st.Invites[i]
			if in.Hash != hash || in.ExpiresAtMs <= now {
				continue
			}
			if in.Used && !inviteHeld(st, hash) {
				continue
			}
			invite = in
		}
	}
	if paired == nil && invite == nil {
		return nil, nodelink.ErrUnauthorized
	}
	return func(l *nodelink.Conn) { h.serve(l, hash, paired) }, nil
}

// serve checks the signed hello of an admitted link and serves it until
// it ends. paired is the node the bearer's node token belongs to; nil
// for a join token (of hash).
func (h *Hub) serve(ws *nodelink.Conn, hash string, paired *Paired) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ip := ws.RemoteIP()
	c := &conn{h: h, link: ws, ctx: ctx, cancel: cancel, remoteIP: ip, calls: map[string]chan apitype.Frame{}}
	defer c.failCalls()
	nonce := make([]byte, 24)
	rand.Read(nonce)
	n := hex.EncodeToString(nonce)
	if c.event("connect.challenge", map[string]string{"nonce": n}) != nil {
		return
	}
	hctx, hcancel := context.WithTimeout(ctx, 15*time.Second)
	_, b, err := ws.Read(hctx)
	hcancel()
	if err != nil {
		ws.CloseNow()
		return
	}
	var f apitype.Frame
	if json.Unmarshal(b, &f) != nil || f.Type != "req" || f.Method != "node.hello" || json.Unmarshal(f.Params, &c.hello) != nil {
		ws.Close(CloseAuth, "expected node.hello")
		return
	}
	hello := c.hello
	pub, err1 := base64.StdEncoding.DecodeString(hello.PublicKey)
	sig, err2 := base64.StdEncoding.DecodeString(hello.Signature)
	if err1 != nil || err2 != nil || len(pub) != ed25519.PublicKeySize || apitype.NodeIDOf(pub) != hello.NodeID ||
		!ed25519.Verify(pub, apitype.NodeHelloMessage(n), sig) {
		ws.Close(CloseAuth, "node identity check failed")
		return
	}
	if msg := checkHello(&c.hello); msg != "" {
		ws.Close(CloseAuth, msg)
		return
	}
	hello = c.hello
	if paired == nil && h.podInvite(hash) {
		h.pairPod(c, f.ID, hash, ws.PodToken())
		return
	}
	reply := func(v any) error {
		b, _ := json.Marshal(v)
		return c.send(apitype.Frame{Type: "res", ID: f.ID, OK: true, Payload: b})
	}
	if paired != nil {
		if paired.NodeID != hello.NodeID || paired.PublicKey != hello.PublicKey {
			ws.Close(CloseAuth, "node token does not belong to this node")
			return
		}
		if reply(apitype.NodeHelloReply{Status: "paired", NodeID: hello.NodeID}) != nil {
			return
		}
		h.online(c)
		return
	}
	// A join token: a node approved while offline gets its token now;
	// others become (or stay) a pairing request.
	var token string
	var reqID, reqName string
	err = h.store.Update(func(st *State) error {
		for i := range st.Paired {
			p := &st.Paired[i]
			if p.NodeID != hello.NodeID {
				continue
			}
			if p.Undelivered && p.InviteHash == hash && p.PublicKey == hello.PublicKey {
				token = NewToken("cnt_")
				p.TokenHash, p.Undelivered = TokenHash(token), false
				return nil
			}
			return errors.New("node is already paired; it must connect with its node token")
		}
		for _, p := range st.Pending {
			if p.NodeID == hello.NodeID && p.PublicKey == hello.PublicKey {
				reqID, reqName = p.RequestID, p.Name
				return nil
			}
		}
		if len(st.Pending) >= MaxPending {
			return fmt.Errorf("too many pairing requests (%d) are waiting; approve or remove some", len(st.Pending))
		}
		for i := range st.Invites {
			in := &st.Invites[i]
			if in.Hash != hash {
				continue
			}
			if in.Used {
				return errors.New("join token already used")
			}
			if in.Once {
				in.Used = true
			}
		}
		p := st.addPending(hello, ip, hash)
		reqID, reqName = p.RequestID, p.Name
		return nil
	})
	if err != nil {
		b, _ := json.Marshal(map[string]any{})
		c.send(apitype.Frame{Type: "res", ID: f.ID, Payload: b, Error: apitype.Errorf("UNAUTHORIZED", "%v", err)})
		ws.Close(CloseAuth, err.Error())
		return
	}
	if token != "" {
		if reply(apitype.NodeHelloReply{Status: "paired", NodeID: hello.NodeID}) != nil {
			return
		}
		if c.event("node.paired", map[string]string{"nodeToken": token, "nodeId": hello.NodeID}) != nil {
			return
		}
		h.online(c)
		return
	}
	if reply(apitype.NodeHelloReply{Status: "pending", RequestID: reqID, NodeID: hello.NodeID}) != nil {
		return
	}
	h.emit("node.pairing.requested", map[string]any{"nodeId": hello.NodeID, "name": reqName, "platform": hello.Platform, "remoteIp": ip, "requestId": reqID})
	// The request was listed (and could be approved) before this
	// connection is in waiting: an approval in between found no
	// connection to hand the token to, and the node, still connected,
	// would have waited for it forever. Under pairMu an approval comes
	// wholly before the registration (then the token goes out here, as
	// to a node approved while offline) or wholly after (Approve finds
	// the connection).
	h.pairMu.Lock()
	h.mu.Lock()
	old := h.waiting[hello.NodeID]
	h.waiting[hello.NodeID] = c
	h.mu.Unlock()
	if old != nil {
		h.disconnect(old, nodelink.ClosePolicyViolation, "replaced by a newer connection")
	}
	var late string
	h.updateStore(func(st *State) error {
		for i := range st.Paired {
			p := &st.Paired[i]
			if p.NodeID == hello.NodeID && p.Undelivered && p.InviteHash == hash && p.PublicKey == hello.PublicKey {
				late = NewToken("cnt_")
				p.TokenHash, p.Undelivered = TokenHash(late), false
			}
		}
		return nil
	})
	if late != "" {
		h.mu.Lock()
		delete(h.waiting, hello.NodeID)
		h.mu.Unlock()
	}
	h.pairMu.Unlock()
	if late != "" {
		if c.event("node.paired", map[string]string{"nodeToken": late, "nodeId": hello.NodeID}) == nil {
			h.promote(c)
		}
	}
	h.readLoop(c)
	h.mu.Lock()
	promoted := h.conns[hello.NodeID] == c
	if h.waiting[hello.NodeID] == c {
		delete(h.waiting, hello.NodeID)
	}
	h.mu.Unlock()
	if promoted {
		h.offline(c)
	}
}

// MaxPending bounds the pairing requests waiting for an operator: a
// reusable join token must not let its holder grow the pairing state
// without limit.
const MaxPending = 64

// addPending makes a node's hello a pairing request. The proposed name
// is checked like any name: it never looks like an id and never takes a
// name a paired node or another request holds (assignName).
func (st *State) addPending(hello apitype.NodeHello, ip, inviteHash string) Pending {
	now := time.Now()
	p := Pending{RequestID: newID(), NodeID: hello.NodeID, PublicKey: hello.PublicKey,
		Name: st.assignName(hello.Name, hello.NodeID, true), Platform: hello.Platform, Arch: hello.Arch,
		Version: hello.Version, Caps: hello.Caps, RemoteIP: ip, InviteHash: inviteHash,
		CreatedAtMs: now.UnixMilli(), ExpiresAtMs: now.Add(24 * time.Hour).UnixMilli()}
	st.Pending = append(st.Pending, p)
	return p
}

func inviteHeld(st *State, hash string) bool {
	for _, p := range st.Pending {
		if p.InviteHash == hash {
			return true
		}
	}
	for _, p := range st.Paired {
		if p.Undelivered && p.InviteHash == hash {
			return true
		}
	}
	return false
}

// newID returns a pairing request's id: 8-4-4-4-12 hex digits, a form
// no node name may take (apitype.IsRequestIDForm), since approve and
// remove match request ids before any node reference.
func newID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// online registers a paired connection and serves it until it ends.
func (h *Hub) online(c *conn) {
	h.promote(c)
	h.readLoop(c)
	h.offline(c)
}

// promote makes c the node's live connection and resynchronises its
// mirrored sessions.
func (h *Hub) promote(c *conn) {
	id := c.hello.NodeID
	h.mu.Lock()
	old := h.conns[id]
	h.conns[id] = c
	var ms []*mirror
	for _, m := range h.mirrors {
		if m.nodeID == id {
			ms = append(ms, m)
		}
	}
	h.mu.Unlock()
	if old != nil && old != c {
		h.disconnect(old, nodelink.ClosePolicyViolation, "replaced by a newer connection")
	}
	name := ""
	h.updateStore(func(st *State) error {
		for i := range st.Paired {
			p := &st.Paired[i]
			if p.NodeID == id {
				p.Platform, p.Arch, p.Version, p.Caps = c.hello.Platform, c.hello.Arch, c.hello.Version, c.hello.Caps
				p.RemoteIP, p.LastSeen = c.remoteIP, time.Now().UnixMilli()
				name = p.Name
			}
		}
		return nil
	})
	h.log.Info("node connected", "node", id, "name", name, "remote", c.remoteIP)
	h.emit("node.connected", map[string]any{"nodeId": id, "name": name, "platform": c.hello.Platform, "remoteIp": c.remoteIP})
	for _, m := range ms {
		h.wg.Add(1)
		go func() { defer h.wg.Done(); m.resume(c) }()
	}
	h.wg.Add(1)
	go func() { defer h.wg.Done(); h.reap(c) }()
	h.wg.Add(1)
	go func() { defer h.wg.Done(); h.keepalive(c) }()
}

func (h *Hub) offline(c *conn) {
	id := c.hello.NodeID
	h.mu.Lock()
	was := h.conns[id] == c
	if was {
		delete(h.conns, id)
	}
	h.mu.Unlock()
	c.cancel()
	c.failCalls()
	if was {
		h.updateStore(func(st *State) error {
			for i := range st.Paired {
				if st.Paired[i].NodeID == id {
					st.Paired[i].LastSeen = time.Now().UnixMilli()
				}
			}
			return nil
		})
		h.log.Info("node disconnected", "node", id)
		h.emit("node.disconnected", map[string]any{"nodeId": id, "name": h.nameOf(id), "platform": c.hello.Platform, "remoteIp": c.remoteIP})
	}
}

func (h *Hub) nameOf(id string) string {
	st, _ := h.store.Read()
	if st != nil {
		for _, p := range st.Paired {
			if p.NodeID == id {
				return p.Name
			}
		}
	}
	return ""
}

// keepalive pings c; no pong within three intervals ends the connection.
func (h *Hub) keepalive(c *conn) {
	if err := c.link.Keepalive(c.ctx, h.opt.Ping); err != nil {
		h.log.Info("node keepalive failed", "node", c.hello.NodeID, "err", err)
	}
}

// readLoop reads frames until the connection ends.
func (h *Hub) readLoop(c *conn) {
	defer c.cancel()
	for {
		binary, b, err := c.link.Read(c.ctx)
		if err != nil {
			return
		}
		h.frame(c, binary, b)
	}
}

// frame handles one frame from a node: checked (validate.go) before any
// of it is used. A panic drops that frame (logged and counted) and keeps
// the link and the gateway up.
func (h *Hub) frame(c *conn, binary bool, b []byte) {
	defer func() {
		if v := recover(); v != nil {
			guard.Recovered("nodehub", h.log, v)
		}
	}()
	if binary {
		// exec.output in binary form (apitype.EncodeNodeOutput).
		o, err := apitype.DecodeNodeOutput(b)
		if err == nil {
			err = checkOutput(o)
		}
		if err != nil {
			c.refused("exec.output", err)
			return
		}
		if m := h.mirror(o.SessionID, c.hello.NodeID); m != nil {
			m.output(o)
		}
		return
	}
	var f apitype.Frame
	if err := json.Unmarshal(b, &f); err != nil {
		c.refused("frame", err)
		return
	}
	if err := checkFrame(&f); err != nil {
		c.refused("frame", err)
		if f.Type != "res" {
			return
		}
		// The call it answers (if any) fails rather than waits.
		f = apitype.Frame{Type: "res", ID: f.ID, Error: apitype.Errorf(apitype.NodeUnavailable, "node %s sent an invalid response (%v)", c.hello.NodeID, err)}
	}
	switch f.Type {
	case "res":
		c.cmu.Lock()
		ch := c.calls[f.ID]
		c.cmu.Unlock()
		if ch != nil {
			select {
			case ch <- f:
			default:
			}
		}
	case "event":
		h.nodeEvent(c, f)
	case "req":
		eb, _ := json.Marshal(map[string]any{})
		c.send(apitype.Frame{Type: "res", ID: f.ID, Payload: eb, Error: apitype.Errorf(apitype.NodeInvalidRequest, "INVALID_REQUEST: unknown method %s", f.Method)})
	}
}

func (h *Hub) nodeEvent(c *conn, f apitype.Frame) {
	switch f.Event {
	case "exec.output":
		var o apitype.NodeOutput
		err := json.Unmarshal(f.Payload, &o)
		if err == nil {
			err = checkOutput(o)
		}
		if err != nil {
			c.refused("exec.output", err)
			return
		}
		if m := h.mirror(o.SessionID, c.hello.NodeID); m != nil {
			m.output(o)
		}
	case "exec.finished":
		var fin apitype.NodeFinished
		if err := json.Unmarshal(f.Payload, &fin); err != nil {
			c.refused("exec.finished", err)
			return
		}
		ex, err := checkFinished(fin)
		if err != nil {
			c.refused("exec.finished", err)
			if m := h.mirror(fin.SessionID, c.hello.NodeID); m != nil {
				// An end state that cannot be trusted still ends the
				// session (nothing waits for ever), as lost.
				m.end(proto.Exit{State: proto.StateLost, EndedAt: time.Now().UnixMilli(),
					Reason: fmt.Sprintf("Command lost: node %s reported an invalid end state (%v).", c.hello.NodeID, err)})
			}
			return
		}
		if m := h.mirror(fin.SessionID, c.hello.NodeID); m != nil {
			m.end(ex)
		}
	}
}

func (h *Hub) mirror(id, nodeID string) *mirror {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.mirrors[id]
	if m == nil || m.nodeID != nodeID {
		return nil
	}
	return m
}

// Select picks a paired node for an exec run or apply_patch: query is the agent's stored binding or the call's node, read as
// one kind of reference (an id matches the id only, a name the name
// only); an id prefix is refused. "" is the only connected node.
func (h *Hub) Select(query string) (port.Ref, *apitype.Error) {
	return h.selectNode(query, false)
}

// SelectOperator is Select for a reference an operator typed (conch
// approvals --node): an id prefix of at least apitype.MinNodePrefix
// characters is accepted too.
func (h *Hub) SelectOperator(query string) (port.Ref, *apitype.Error) {
	return h.selectNode(query, true)
}

func (h *Hub) selectNode(query string, operator bool) (port.Ref, *apitype.Error) {
	st, err := h.store.Read()
	if err != nil {
		return port.Ref{}, apitype.Errorf(apitype.CodeNodeUnavailable, "node pairing state unreadable: %v", err)
	}
	h.mu.Lock()
	connected := map[string]*conn{}
	for id, c := range h.conns {
		connected[id] = c
	}
	h.mu.Unlock()
	var p Paired
	if strings.TrimSpace(query) == "" {
		var cands []Paired
		for _, p := range st.Paired {
			// A sandbox pod is no node host: only its agent's sandbox
			// reaches it (podpair.go).
			if c := connected[p.NodeID]; c != nil && slices.Contains(c.hello.Caps, "system.run") && p.Pod == nil {
				cands = append(cands, p)
			}
		}
		switch len(cands) {
		case 0:
			return port.Ref{}, apitype.Errorf(apitype.CodeNodeUnavailable, "exec host=node requires a paired node (none available). This requires a node host (conch node).")
		case 1:
		default:
			return port.Ref{}, apitype.Errorf(apitype.CodeNodeAmbiguous, "exec host=node requires a node id when multiple nodes are available (set tools.exec.node or exec.node).")
		}
		p = cands[0]
	} else {
		r, err := apitype.ParseNodeRef(query)
		if err != nil {
			return port.Ref{}, apitype.Errorf(apitype.CodeNodeUnknown, "unknown node: %v", err)
		}
		if r.Kind == apitype.NodeRefPrefix {
			if !operator {
				return port.Ref{}, apitype.Errorf(apitype.CodeNodeUnknown, "unknown node: %s (an id prefix is not accepted here: give the node's full id, its name or its IP)", query)
			}
			if len(r.Value) < apitype.MinNodePrefix {
				return port.Ref{}, apitype.Errorf(apitype.CodeNodeUnknown, "unknown node: %s (an id prefix needs at least %d characters)", query, apitype.MinNodePrefix)
			}
		}
		cs := st.lookup(r, true, false)
		switch {
		case len(cs) == 0 && r.Kind == apitype.NodeRefID:
			return port.Ref{}, apitype.Errorf(apitype.CodeNodeUnavailable, "node %s is not paired (unknown or removed).", r.Value)
		case len(cs) == 0:
			var known []string
			for _, p := range st.Paired {
				known = append(known, p.Name)
			}
			sort.Strings(known)
			return port.Ref{}, apitype.Errorf(apitype.CodeNodeUnknown, "unknown node: %s (known: %s)", query, strings.Join(known, ", "))
		case len(cs) > 1:
			return port.Ref{}, apitype.Errorf(apitype.CodeNodeAmbiguous, "ambiguous node: %s (matches: %s)", query, labels(cs))
		}
		i := slices.IndexFunc(st.Paired, func(p Paired) bool { return p.NodeID == cs[0].id })
		p = st.Paired[i]
		if p.Pod != nil {
			return port.Ref{}, apitype.Errorf(apitype.CodeNodeUnavailable, "node %s (%s) is the sandbox pod %s/%s of the kubernetes backend, not a node host.", p.Name, p.NodeID, p.Pod.Namespace, p.Pod.Name)
		}
	}
	c := connected[p.NodeID]
	if c == nil {
		return port.Ref{}, apitype.Errorf(apitype.CodeNodeUnavailable, "node %s (%s) is not connected.", p.Name, p.NodeID)
	}
	if !slices.Contains(c.hello.Caps, "system.run") {
		return port.Ref{}, apitype.Errorf(apitype.CodeNodeUnavailable, "exec host=node requires a node that supports system.run (node host).")
	}
	return port.Ref{ID: p.NodeID, Name: p.Name, Caps: c.hello.Caps}, nil
}

func (h *Hub) conn(nodeID string) *conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[nodeID]
}

// Call runs method on a connected node.
func (h *Hub) Call(ctx context.Context, nodeID, method string, params any, timeout time.Duration) (json.RawMessage, *apitype.Error) {
	c := h.conn(nodeID)
	if c == nil {
		return nil, apitype.Errorf(apitype.NodeUnavailable, "node %s is not connected.", nodeID)
	}
	return c.call(ctx, method, params, timeout)
}

// Prepare sends system.run.prepare.
func (h *Hub) Prepare(ctx context.Context, nodeID string, p apitype.NodePrepareParams) (apitype.NodePrepareReply, *apitype.Error) {
	var rep apitype.NodePrepareReply
	b, aerr := h.Call(ctx, nodeID, "system.run.prepare", p, 15*time.Second)
	if aerr != nil {
		return rep, aerr
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, apitype.Errorf(apitype.NodeUnavailable, "node %s: bad prepare reply: %v", nodeID, err)
	}
	return rep, nil
}

// Approve pairs a pending request; a connected requester gets its node
// token at once.
func (h *Hub) Approve(q string) (Paired, error) {
	h.pairMu.Lock()
	p, tok, err := h.store.Approve(q)
	if err != nil {
		h.pairMu.Unlock()
		return p, err
	}
	h.mu.Lock()
	c := h.waiting[p.NodeID]
	delete(h.waiting, p.NodeID)
	h.mu.Unlock()
	h.pairMu.Unlock()
	if c != nil && c.event("node.paired", map[string]string{"nodeToken": tok, "nodeId": p.NodeID}) == nil {
		h.updateStore(func(st *State) error {
			for i := range st.Paired {
				if st.Paired[i].NodeID == p.NodeID {
					st.Paired[i].Undelivered = false
				}
			}
			return nil
		})
		p.Undelivered = false
		h.promote(c)
	}
	return p, nil
}

// Remove rejects a pending request or revokes a paired node.
func (h *Hub) Remove(q string) (string, error) {
	var id string
	var pending bool
	err := h.store.Update(func(st *State) error {
		c, err := st.resolve(q, true, true)
		if err != nil {
			return err
		}
		id, pending = c.id, c.pending
		st.Pending = filter(st.Pending, func(p Pending) bool { return p.NodeID != id })
		if !pending {
			st.Paired = filter(st.Paired, func(p Paired) bool { return p.NodeID != id })
			for sid, r := range st.Routes {
				if r.NodeID == id {
					delete(st.Routes, sid) // no node left to reach it through
				}
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	c, w := h.conns[id], h.waiting[id]
	h.mu.Unlock()
	if w != nil {
		w.event("node.rejected", map[string]string{"nodeId": id})
		h.disconnect(w, CloseRevoked, "pairing rejected")
	}
	if c != nil && !pending {
		h.disconnect(c, CloseRevoked, "node removed")
	}
	if !pending {
		h.endSessionsOf(id)
	}
	h.emit("node.removed", map[string]any{"nodeId": id})
	return id, nil
}

// Rename gives a paired node a new (normalised, unique) name.
func (h *Hub) Rename(q, name string) (Paired, error) {
	var out Paired
	n := apitype.NormalizeNodeName(name)
	if err := apitype.ValidNodeName(n); err != nil {
		return out, err
	}
	err := h.store.Update(func(st *State) error {
		c, err := st.resolve(q, true, false)
		if err != nil {
			return err
		}
		id := c.id
		if h := foreignIDPart(n, id); h != "" {
			return fmt.Errorf("invalid node name %q: %q reads as the start of another node's id (a part of 6 or more hex digits must start this node's id, %s)", n, h, id)
		}
		if st.nameTaken(n, id, true) {
			return fmt.Errorf("%w: %s", ErrNameTaken, n)
		}
		for i := range st.Paired {
			if st.Paired[i].NodeID == id {
				st.Paired[i].Name = n
				out = st.Paired[i]
			}
		}
		return nil
	})
	if err == nil {
		h.emit("node.renamed", map[string]any{"nodeId": out.NodeID, "name": out.Name})
	}
	return out, err
}

// List returns paired nodes and pending requests.
func (h *Hub) List() ([]Node, error) {
	st, err := h.store.Read()
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []Node{}
	for _, p := range st.Paired {
		n := Node{NodeID: p.NodeID, Name: p.Name, Status: "offline", Platform: p.Platform, Arch: p.Arch, Version: p.Version,
			Caps: p.Caps, RemoteIP: p.RemoteIP, PairedAtMs: p.PairedAt, LastSeenMs: p.LastSeen}
		if h.conns[p.NodeID] != nil {
			n.Status, n.Connected = "connected", true
		}
		out = append(out, n)
	}
	for _, p := range st.Pending {
		out = append(out, Node{NodeID: p.NodeID, Name: p.Name, Status: "pending", Platform: p.Platform, Arch: p.Arch,
			Version: p.Version, Caps: p.Caps, RemoteIP: p.RemoteIP, RequestID: p.RequestID, RequestedMs: p.CreatedAtMs, ExpiresAtMs: p.ExpiresAtMs})
	}
	return out, nil
}

// PatchApply runs apply_patch on the node query selects (the agent's
// binding, else the only connected node) through system.patch.apply.
func (h *Hub) PatchApply(ctx context.Context, query, agent, input string) (port.Patch, *apitype.Error) {
	var np port.Patch
	ref, aerr := h.Select(query)
	if aerr != nil {
		return np, aerr
	}
	return h.patchOn(ctx, ref, agent, input)
}

// PatchPod applies a patch on the node of a sandbox pod (ref, from the
// kubernetes backend), in the pod's workspace.
func (h *Hub) PatchPod(ctx context.Context, ref port.Ref, agent, input string) (port.Patch, *apitype.Error) {
	return h.patchOn(ctx, ref, agent, input)
}

func (h *Hub) patchOn(ctx context.Context, ref port.Ref, agent, input string) (port.Patch, *apitype.Error) {
	var np port.Patch
	np.NodeID, np.NodeName = ref.ID, ref.Name
	if !slices.Contains(ref.Caps, "system.patch") {
		return np, apitype.Errorf(apitype.CodeUnavailable, "apply_patch is not available on node %s (%s).", ref.Name, ref.ID)
	}
	b, aerr := h.Call(ctx, ref.ID, "system.patch.apply", map[string]string{"agentId": agent, "input": input}, 30*time.Second)
	if aerr != nil {
		if aerr.Code == apitype.NodeUnavailable {
			aerr = apitype.Errorf(apitype.CodeNodeUnavailable, "%s", aerr.Message)
		}
		return np, aerr
	}
	var raw struct {
		Text    string          `json:"text"`
		Details json.RawMessage `json:"details"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return np, apitype.Errorf(apitype.CodeNodeUnavailable, "node %s: bad patch answer: %v", ref.ID, err)
	}
	np.Result.Text = raw.Text
	var status struct{ Status string }
	json.Unmarshal(raw.Details, &status)
	if status.Status == "completed" {
		d := &apitype.PatchDetails{}
		json.Unmarshal(raw.Details, d)
		np.Result.Details = d
	} else {
		d := &apitype.ErrorDetails{}
		json.Unmarshal(raw.Details, d)
		np.Result.Details = d
	}
	return np, nil
}
