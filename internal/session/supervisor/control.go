package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/base/unixsock"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// listen opens the session's control socket; in a shared supervisor, the session is
// served on the shared supervisor's socket instead.
func (s *sup) listen() error {
	if s.shared {
		return sharedSessions.add(s)
	}
	ln, err := listenControl(s.spec.Socket, func(id string) *sup {
		if id == "" || id == s.spec.ID {
			return s
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.ln = ln
	s.socket = s.spec.Socket
	return nil
}

// listenControl listens on the unix socket path and serves each request
// to the session find returns for its Session field.
func listenControl(path string, find func(id string) *sup) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("no socket path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// A shared fallback directory (/tmp/conch-<uid>-…) must be ours:
	// another user could otherwise read or replace our sockets.
	if fi, err := os.Stat(filepath.Dir(path)); err != nil {
		return nil, err
	} else if uid, ok := fileUID(fi); ok && uid != os.Getuid() {
		return nil, fmt.Errorf("socket directory %s is owned by uid %d, not %d", filepath.Dir(path), uid, os.Getuid())
	} else if fi.Mode().Perm()&0o077 != 0 {
		// Only we may reach the sockets in it. (unixsock never changes
		// the umask: it is the process's, and a shared supervisor starts other
		// sessions' commands meanwhile.)
		if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
	}
	ln, err := unixsock.Listen(path, 0o600)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c.(*net.UnixConn), find)
		}
	}()
	return ln, nil
}

// PeerUID is the uid of the process at the other end of c (SO_PEERCRED
// on Linux, LOCAL_PEERCRED on macOS: see socketPeerUID).
func PeerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	uid, cerr := -1, error(nil)
	raw.Control(func(fd uintptr) {
		uid, cerr = socketPeerUID(int(fd))
	})
	if cerr != nil {
		return -1, cerr
	}
	return uid, nil
}

func serve(c *net.UnixConn, find func(id string) *sup) {
	if uid, err := PeerUID(c); err != nil || uid != os.Getuid() {
		c.Close()
		return
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 32<<20)
	enc := json.NewEncoder(c)
	for sc.Scan() {
		var req proto.Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			enc.Encode(proto.Reply{Error: "bad request: " + err.Error()})
			continue
		}
		if req.V != proto.ProtocolVersion {
			enc.Encode(proto.Reply{Error: fmt.Sprintf("unsupported protocol version %d", req.V)})
			continue
		}
		if req.Op == "flush" && req.Session == "" {
			// A shared supervisor writes the files its sessions owe before an engine
			// reads the home (sup.flushFiles); a single supervisor owes
			// none.
			sharedSessions.flushAll()
			enc.Encode(proto.Reply{OK: true})
			continue
		}
		s := find(req.Session)
		if s == nil {
			enc.Encode(proto.Reply{Error: errNoSession})
			continue
		}
		if req.Op == "subscribe" {
			enc.Encode(proto.Reply{OK: true})
			sub := s.addSubscriber(c)
			// Reading on detects the peer closing; requests are not
			// accepted on a subscription.
			io.Copy(io.Discard, c)
			sub.w.Close()
			return
		}
		enc.Encode(s.handle(req))
	}
	c.Close()
}

func (s *sup) handle(req proto.Request) proto.Reply {
	switch req.Op {
	case "hello":
		return proto.Reply{OK: true, PID: s.cmd.Process.Pid}
	case "status":
		return proto.Reply{OK: true, Status: s.status()}
	case "meta":
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.meta == nil {
			return proto.Reply{Error: "session is starting"}
		}
		return proto.Reply{OK: true, Meta: s.meta}
	case "write":
		if err := s.write(req.Data); err != nil {
			return proto.Reply{Error: err.Error()}
		}
		return proto.Reply{OK: true}
	case "closeStdin":
		if err := s.closeStdin(); err != nil {
			return proto.Reply{Error: err.Error()}
		}
		return proto.Reply{OK: true}
	case "signal":
		s.cont.signal(syscall.Signal(req.Sig))
		return proto.Reply{OK: true}
	case "kill":
		grace := s.grace()
		if req.GraceMs != nil {
			grace = time.Duration(*req.GraceMs) * time.Millisecond
		}
		by := proto.KilledBy(req.By)
		if by == "" {
			by = proto.KilledByAgent
		}
		if !by.Valid() || by == proto.KilledByOOM {
			return proto.Reply{Error: fmt.Sprintf("kill: unknown cause %q", req.By)}
		}
		s.kill(by, grace)
		return proto.Reply{OK: true}
	case "trim":
		if req.MaxBytes <= 0 {
			return proto.Reply{Error: "trim: maxBytes must be positive"}
		}
		s.jmu.Lock()
		j := s.j
		s.jmu.Unlock()
		if j == nil {
			return proto.Reply{Error: "trim: no journal"}
		}
		_, after, err := j.Trim(req.MaxBytes)
		if err != nil {
			return proto.Reply{Error: err.Error()}
		}
		s.logf("journal trimmed to %d bytes (cap %d)", after, req.MaxBytes)
		return proto.Reply{OK: true, Bytes: after}
	case "resize":
		if s.ptmx == nil {
			return proto.Reply{Error: "not a PTY session"}
		}
		if req.Cols < 1 || req.Rows < 1 || req.Cols > 0xffff || req.Rows > 0xffff {
			return proto.Reply{Error: fmt.Sprintf("invalid size %dx%d", req.Cols, req.Rows)}
		}
		// The emulator first: output the program writes for the new
		// size must not be emulated at the old one.
		s.term.Resize(req.Cols, req.Rows)
		if err := s.setPTYSize(req.Cols, req.Rows); err != nil {
			return proto.Reply{Error: err.Error()}
		}
		return proto.Reply{OK: true}
	case "screen":
		if s.term == nil {
			return proto.Reply{Error: "not a PTY session"}
		}
		// The pump stores the cursor after feeding the terminal: the
		// snapshot covers at least the output up to cur.
		cur := s.cursor.Load()
		snap := s.term.Snapshot()
		return proto.Reply{OK: true, Screen: &snap, Cursor: cur}
	}
	return proto.Reply{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

func (s *sup) status() *proto.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &proto.Status{PID: s.cmd.Process.Pid, Cursor: s.cursor.Load(), Stdin: s.stdinState, Modes: s.modes.Modes(), KilledBy: string(s.killedBy), LastOutputNs: s.lastOutput.Load()}
	st.JournalError, _ = s.journalErr.Load().(string)
	select {
	case <-s.mainExited:
		st.Ending = true
	default:
		st.Ending = s.killing
	}
	return st
}

// answer writes the terminal's replies to queries (cursor position,
// device attributes) to the PTY, as a terminal would, so that a program
// waiting for one does not hang. A program that does not read its input
// for a second loses the reply.
func (s *sup) answer() {
	defer close(s.answered)
	failed := false
	for r := range s.term.Replies() {
		s.wmu.Lock()
		in := s.ptyInput()
		in.SetWriteDeadline(time.Now().Add(time.Second))
		_, err := in.Write(r)
		in.SetWriteDeadline(time.Time{})
		s.wmu.Unlock()
		if err != nil && !failed {
			s.logf("write terminal reply: %v", err)
			failed = true
		}
	}
}

// writeDeadline is how long a write waits for room in the command's
// input (a command that does not read it).
const writeDeadline = 5 * time.Second

// errStdinClosed is reported when input arrives after stdin was closed.
var errStdinClosed = errors.New("stdin is closed")

func (s *sup) write(p []byte) error {
	s.mu.Lock()
	w := s.stdin
	if s.ptmx != nil {
		w = s.ptyInput()
	}
	s.mu.Unlock()
	if w == nil {
		return errStdinClosed
	}
	s.wmu.Lock()
	w.SetWriteDeadline(time.Now().Add(writeDeadline))
	_, err := w.Write(p)
	w.SetWriteDeadline(time.Time{})
	s.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("write stdin: %w", err)
	}
	s.jmu.Lock()
	s.j.AppendInput(p)
	s.jmu.Unlock()
	return nil
}

func (s *sup) closeStdin() error {
	if s.ptmx != nil {
		return s.write([]byte(ptyEOF))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stdin == nil {
		return errStdinClosed
	}
	err := s.stdin.Close()
	s.stdin = nil
	s.stdinState = "closed"
	return err
}
