package hub

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/base/unixsock"
	"github.com/conchsh/conch/internal/session/supervisor/proto"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor"
)

// A mirror stands in for the supervisor of a session that runs on a node:
// it writes the node's output into the local session's journal (so every
// read action works on the gateway), serves the session's control socket
// (forwarding input, signals, kills, resizes and screens to the node as
// system.session.*), and records the end state the node reports. The
// engine cannot tell it from a local supervisor.
type mirror struct {
	h      *Hub
	id     string
	nodeID string
	agent  string
	dir    string

	mu      sync.Mutex // guards the fields below
	w       *journal.Writer
	nodeCur int64 // the node's cursor of the last byte mirrored
	offset  int64 // node cursor minus local cursor
	final   *proto.Exit
	subs    map[chan struct{}]struct{}
	ln      net.Listener
	stopped bool
	// pendingKill is a kill asked for while the node was unreachable: it
	// is delivered when the node is back (resume).
	pendingKill *proto.Request
}

func (m *mirror) kick() {
	for ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Start mirrors spec.ID and sends system.run.
func (h *Hub) Start(nodeID string, spec proto.Spec, run apitype.NodeRunParams) (*proto.Handle, error) {
	dir := proto.SessionDir(h.opt.Home, spec.ID)
	// A new session, maybe in a reused directory (see supervisor's launch).
	w, err := journal.Create(proto.JournalDir(dir), journal.Options{MaxBytes: spec.JournalMaxBytes, HeadBytes: spec.JournalHeadBytes, New: true})
	if err != nil {
		return nil, err
	}
	m := &mirror{h: h, id: spec.ID, nodeID: nodeID, agent: spec.Agent, dir: dir, w: w, subs: map[chan struct{}]struct{}{}}
	meta := proto.Meta{
		V: proto.ProtocolVersion, ID: spec.ID, Agent: spec.Agent, Name: spec.Name, Command: spec.Command, Argv: spec.Argv,
		Cwd: run.Cwd, Host: "node", NodeID: nodeID, PTY: spec.PTY, Cols: spec.Cols, Rows: spec.Rows, Stdin: spec.Stdin,
		State: "starting", StartedAt: time.Now().UnixMilli(), SupervisorPID: os.Getpid(),
		SupervisorStartTime: supervisor.StartTime(os.Getpid()), Socket: spec.Socket, KillGraceMs: spec.KillGraceMs,
		IdempotencyKey: spec.IdempotencyKey, Fingerprint: spec.Fingerprint, EnvKeys: spec.EnvKeys,
	}
	if spec.TimeoutMs > 0 {
		meta.TimeoutAt = meta.StartedAt + spec.TimeoutMs
	}
	if err := m.listen(spec.Socket); err != nil {
		w.Close()
		return nil, err
	}
	if err := h.store.Update(func(st *State) error {
		st.Routes[spec.ID] = Route{NodeID: nodeID, Agent: spec.Agent}
		return nil
	}); err != nil {
		m.stop()
		return nil, err
	}
	h.mu.Lock()
	h.mirrors[spec.ID] = m
	h.mu.Unlock()
	fail := func(err error) (*proto.Handle, error) {
		m.stop()
		h.dropMirror(m)
		return nil, err
	}
	// Subscribe before the run starts: no event can be missed.
	events, closeEvents := m.subscribe()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, aerr := h.Call(ctx, nodeID, "system.run", run, 15*time.Second)
	if aerr != nil {
		closeEvents()
		return fail(aerr)
	}
	var rep apitype.NodeRunReply
	json.Unmarshal(b, &rep)
	meta.State, meta.PID = "running", rep.PID
	if err := proto.WriteMeta(dir, meta); err != nil {
		closeEvents()
		return fail(err)
	}
	return &proto.Handle{PID: rep.PID, SupervisorPID: os.Getpid(), Events: events, Close: closeEvents}, nil
}

func (h *Hub) dropMirror(m *mirror) {
	h.mu.Lock()
	if h.mirrors[m.id] == m {
		delete(h.mirrors, m.id)
	}
	h.mu.Unlock()
	h.updateStore(func(st *State) error {
		delete(st.Routes, m.id)
		return nil
	})
}

// restore re-creates the mirrors of sessions still running on nodes.
func (h *Hub) restore() {
	st, err := h.store.Read()
	if err != nil {
		h.log.Warn("read node routes", "err", err)
		return
	}
	var gone []string
	var orphans []*mirror // of nodes no longer paired
	paired := map[string]bool{}
	for _, p := range st.Paired {
		paired[p.NodeID] = true
	}
	for id, r := range st.Routes {
		if r.Removed {
			// A removed session is not mirrored again: its route stays
			// only to deliver the kill (promote), while its node is paired.
			if !paired[r.NodeID] {
				gone = append(gone, id)
			}
			continue
		}
		dir := proto.SessionDir(h.opt.Home, id)
		if ex, ok, _ := proto.ReadExit(dir); ok && ex.Final {
			gone = append(gone, id)
			continue
		}
		var meta proto.Meta
		if err := fsutil.ReadJSON(proto.MetaPath(dir), &meta); err != nil {
			gone = append(gone, id)
			continue
		}
		w, err := journal.Create(proto.JournalDir(dir), journal.Options{})
		if err != nil {
			h.log.Warn("reopen node session journal", "session", id, "err", err)
			continue
		}
		m := &mirror{h: h, id: id, nodeID: r.NodeID, agent: r.Agent, dir: dir, w: w, offset: r.Offset, subs: map[chan struct{}]struct{}{}}
		m.nodeCur = w.Cursor() + r.Offset
		if r.KillBy != "" {
			m.pendingKill = &proto.Request{V: proto.ProtocolVersion, Op: "kill", Session: id, By: r.KillBy}
		}
		if err := m.listen(meta.Socket); err != nil {
			w.Close()
			h.log.Warn("node session socket", "session", id, "err", err)
			continue
		}
		meta.SupervisorPID, meta.SupervisorStartTime = os.Getpid(), supervisor.StartTime(os.Getpid())
		if err := proto.WriteMeta(dir, meta); err != nil {
			// The old meta.json names the gateway process before this
			// one, so a reader that finds that process gone would take
			// the session for lost: serve it only from memory, and say so.
			h.log.Warn("node session meta.json not rewritten: it names the previous gateway", "session", id, "err", err)
		}
		h.mirrors[id] = m
		if !paired[r.NodeID] {
			orphans = append(orphans, m)
		}
	}
	if len(gone) > 0 {
		h.updateStore(func(st *State) error {
			for _, id := range gone {
				delete(st.Routes, id)
			}
			return nil
		})
	}
	for _, m := range orphans {
		m.end(removedExit(m.nodeID))
	}
}

// removedExit is the end state of a session whose node was removed
// before it reported the end: no node can be reached to learn it.
func removedExit(nodeID string) proto.Exit {
	return proto.Exit{State: proto.StateLost, EndedAt: time.Now().UnixMilli(),
		Reason: fmt.Sprintf("Command lost: node %s was removed from the gateway before the command ended; it may still run on that machine.", nodeID)}
}

// endSessionsOf ends the mirrored sessions of a removed node as lost: no
// connection can bring their end state any more, and an agent waiting on
// one must not wait for ever.
func (h *Hub) endSessionsOf(nodeID string) {
	for _, m := range h.mirrorsOf(nodeID) {
		m.end(removedExit(nodeID))
	}
}

// subscribe returns a channel of supervisor events: cursor updates and,
// last, the end state.
func (m *mirror) subscribe() (<-chan proto.Event, func()) {
	out := make(chan proto.Event, 16)
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	var once sync.Once
	m.mu.Lock()
	m.subs[wake] = struct{}{}
	m.mu.Unlock()
	wake <- struct{}{}
	go func() {
		defer close(out)
		defer func() {
			m.mu.Lock()
			delete(m.subs, wake)
			m.mu.Unlock()
		}()
		last := int64(-1)
		for {
			select {
			case <-wake:
			case <-done:
				return
			}
			m.mu.Lock()
			final := m.final
			cur := m.w.Cursor()
			stopped := m.stopped
			m.mu.Unlock()
			ev := proto.Event{Cursor: cur}
			if final != nil {
				ev = proto.Event{Cursor: final.OutputBytes, Exit: final}
			} else if cur == last {
				if stopped {
					return
				}
				continue
			}
			select {
			case out <- ev:
			case <-done:
				return
			}
			last = cur
			if final != nil || stopped {
				return
			}
		}
	}()
	return out, func() { once.Do(func() { close(done) }) }
}

// listen serves the session's control socket.
func (m *mirror) listen(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	ln, err := unixsock.Listen(path, 0o600)
	if err != nil {
		return err
	}
	m.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go m.serve(c)
		}
	}()
	return nil
}

func (m *mirror) serve(c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 32<<20)
	enc := json.NewEncoder(c)
	for sc.Scan() {
		var req proto.Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil || req.V != proto.ProtocolVersion {
			enc.Encode(proto.Reply{Error: "bad request"})
			continue
		}
		if req.Op == "subscribe" {
			enc.Encode(proto.Reply{OK: true})
			events, stop := m.subscribe()
			go func() {
				// The peer closing ends the subscription.
				var b [1]byte
				c.Read(b[:])
				stop()
			}()
			for ev := range events {
				if enc.Encode(ev) != nil {
					stop()
					break
				}
			}
			return
		}
		enc.Encode(m.forward(req))
	}
}

// forward sends a control request to the node's supervisor.
func (m *mirror) forward(req proto.Request) proto.Reply {
	if req.Op == "hello" {
		return proto.Reply{OK: true}
	}
	raw, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	b, aerr := m.h.Call(ctx, m.nodeID, "system.session."+req.Op, apitype.NodeSessionParams{SessionID: m.id, Request: raw}, 10*time.Second)
	if aerr != nil {
		if req.Op == "kill" && aerr.Code == apitype.NodeUnavailable {
			m.mu.Lock()
			m.pendingKill = &req
			m.mu.Unlock()
			m.setRoute(func(r *Route) { r.KillBy = firstNonEmpty(req.By, "agent") })
		}
		return proto.Reply{Error: aerr.Message}
	}
	var rep proto.Reply
	if err := json.Unmarshal(b, &rep); err != nil {
		return proto.Reply{Error: err.Error()}
	}
	return rep
}

// output appends a chunk of the node's journal: duplicates (after a
// resync) are skipped, a range the node dropped moves the offset.
func (m *mirror) output(o apitype.NodeOutput) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.final != nil || m.stopped {
		return
	}
	data := o.Data
	start := o.Cursor - int64(len(data))
	if o.Cursor <= m.nodeCur {
		return
	}
	if start < m.nodeCur {
		data = data[m.nodeCur-start:]
		start = m.nodeCur
	}
	if start > m.nodeCur {
		m.offset += start - m.nodeCur
		off := m.offset
		m.setRoute(func(r *Route) { r.Offset = off })
	}
	stream := journal.Stdout
	if o.Stream == "stderr" {
		stream = journal.Stderr
	}
	if _, err := m.w.Append(stream, data); err != nil {
		m.h.log.Warn("mirror journal append", "session", m.id, "err", err)
		return
	}
	m.nodeCur = o.Cursor
	m.kick()
}

// end records the session's end state (checked by checkFinished, or made
// by the gateway).
func (m *mirror) end(ex proto.Exit) {
	m.mu.Lock()
	if m.final != nil || m.stopped {
		m.mu.Unlock()
		return
	}
	ex.Final = true
	ex.OutputBytes = m.w.Cursor()
	ex.OutputSha256 = ""
	// The journal's end record is a second copy of exit.json, as a
	// local supervisor writes one (proto.ReadExit falls back on it).
	if b, err := json.Marshal(ex); err == nil {
		if err := m.w.AppendEnd(b); err != nil {
			m.h.log.Warn("journal end record of node session", "session", m.id, "err", err)
		}
	}
	if err := m.w.Sync(); err != nil {
		m.h.log.Warn("journal sync of node session", "session", m.id, "err", err)
	}
	if err := proto.WriteExit(m.dir, ex); err != nil {
		m.h.log.Warn("write exit.json of node session", "session", m.id, "err", err)
		ex.NotRecorded = err.Error()
	}
	m.w.Close()
	m.final = &ex
	m.kick()
	ln := m.ln
	m.mu.Unlock()
	m.h.dropMirror(m)
	// Subscribers got the end state; the socket goes a little later so
	// that a reconnecting engine still finds it.
	time.AfterFunc(2*time.Second, func() {
		if ln != nil {
			ln.Close()
		}
	})
}

// stop closes the mirror without an end state (gateway shutdown): the
// session goes on on the node and is resumed after a restart.
func (m *mirror) stop() {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	if m.final == nil {
		if err := m.w.Sync(); err != nil {
			m.h.log.Warn("journal sync of node session", "session", m.id, "err", err)
		}
		m.w.Close()
	}
	ln := m.ln
	m.kick()
	m.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
}

// resume asks the node to stream the session again from the mirror's
// cursor after a (re)connection; a node that no longer knows the session
// ends it as lost.
func (m *mirror) resume(c *conn) {
	m.mu.Lock()
	since := m.nodeCur
	done := m.final != nil || m.stopped
	m.mu.Unlock()
	if done {
		return
	}
	_, aerr := c.call(c.ctx, "system.session.read", apitype.NodeSessionParams{SessionID: m.id, Since: since}, 15*time.Second)
	if aerr == nil {
		m.mu.Lock()
		kill := m.pendingKill
		m.pendingKill = nil
		m.mu.Unlock()
		if kill != nil {
			if rep := m.forward(*kill); rep.Error != "" {
				m.h.log.Warn("deliver a kill asked for while the node was away", "session", m.id, "err", rep.Error)
			} else {
				m.setRoute(func(r *Route) { r.KillBy = "" })
			}
		}
		return
	}
	if errors.Is(c.ctx.Err(), context.Canceled) || aerr.Code == apitype.NodeUnavailable {
		return // the connection went again; the next one resumes
	}
	m.h.log.Warn("node lost a session", "session", m.id, "node", m.nodeID, "err", aerr.Message)
	m.end(proto.Exit{State: proto.StateLost, EndedAt: time.Now().UnixMilli(),
		Reason: fmt.Sprintf("Command lost: node %s no longer knows the session (%s).", m.nodeID, aerr.Message)})
}

// setRoute changes the mirror's route in nodes/sessions.json (if it is
// still there).
func (m *mirror) setRoute(f func(*Route)) {
	m.h.updateStore(func(st *State) error {
		r, ok := st.Routes[m.id]
		if !ok {
			return errStop
		}
		f(&r)
		st.Routes[m.id] = r
		return nil
	})
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Removed records that the gateway removed session id (process remove)
// before its node reported the end: a restarted gateway does not resume
// it, and its kill still reaches the node at its next connection.
func (h *Hub) Removed(id string) {
	h.updateStore(func(st *State) error {
		r, ok := st.Routes[id]
		if !ok {
			return errStop
		}
		r.Removed = true
		if r.KillBy == "" {
			r.KillBy = "agent"
		}
		st.Routes[id] = r
		return nil
	})
}

// reap delivers the kills of removed sessions (routes without a mirror,
// left by an earlier gateway) to a node that just connected, and forgets
// their routes once the node answered.
func (h *Hub) reap(c *conn) {
	st, err := h.store.Read()
	if err != nil {
		return
	}
	for id, r := range st.Routes {
		if !r.Removed || r.NodeID != c.hello.NodeID {
			continue
		}
		h.mu.Lock()
		live := h.mirrors[id] != nil
		h.mu.Unlock()
		if live {
			continue // this gateway still follows it; its end drops the route
		}
		raw, _ := json.Marshal(proto.Request{V: proto.ProtocolVersion, Op: "kill", Session: id, By: r.KillBy})
		_, aerr := c.call(c.ctx, "system.session.kill", apitype.NodeSessionParams{SessionID: id, Request: raw}, 10*time.Second)
		if aerr != nil && aerr.Code == apitype.NodeUnavailable {
			return // the connection went; the next one tries again
		}
		h.updateStore(func(st *State) error {
			delete(st.Routes, id)
			return nil
		})
	}
}

// mirrorsOf returns the mirrored sessions of node nodeID (taken under the
// hub's lock; the caller acts on them without it).
func (h *Hub) mirrorsOf(nodeID string) []*mirror {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ms []*mirror
	for _, m := range h.mirrors {
		if m.nodeID == nodeID {
			ms = append(ms, m)
		}
	}
	return ms
}
