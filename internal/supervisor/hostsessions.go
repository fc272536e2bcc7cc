package supervisor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// What a supervisor host shares with the rest of the package on every
// system (host.go is the host itself, where there are hosts).

// ErrNeedsCgroup is Host.Commit's error for a session the host cannot
// contain (it has no cgroup to give it); a single-session supervisor can.
var ErrNeedsCgroup = errors.New("no session cgroup: a shared supervisor cannot contain this session")

// ErrHostGone is Host.Commit's error when the host process is gone or has
// been retired; the session was not started.
var ErrHostGone = errors.New("supervisor host is gone")

// ErrHostDied is wrapped by Host.Commit's error when the host died after
// it was handed the session: the command may have started (its meta.json
// says), so it must not simply be started again elsewhere.
var ErrHostDied = errors.New("supervisor host died")

// hostRetired is closed when the engine has closed the host's socket:
// sessions then finish without delay.
var hostRetired = make(chan struct{})

// errNoSession answers a request for a session the socket does not serve.
const errNoSession = "no such session here"

// hostSessions are the sessions of this process when it is a host, served
// on one control socket: a socket per session costs an inode on every
// exec.
var hostSessions = &sessionTable{byID: map[string]*sup{}}

type sessionTable struct {
	mu     sync.Mutex
	byID   map[string]*sup
	ln     net.Listener
	socket string
}

// add serves s on the host's socket, which is opened next to the first
// session's own socket path.
func (t *sessionTable) add(s *sup) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ln == nil {
		path := filepath.Join(filepath.Dir(s.spec.Socket), fmt.Sprintf("host-%d.sock", os.Getpid()))
		ln, err := listenControl(path, t.find)
		if err != nil {
			return err
		}
		t.ln, t.socket = ln, path
	}
	t.byID[s.spec.ID] = s
	s.socket = t.socket
	return nil
}

// flushAll writes the files every session still owes (sup.flushFiles).
func (t *sessionTable) flushAll() {
	t.mu.Lock()
	all := make([]*sup, 0, len(t.byID))
	for _, s := range t.byID {
		all = append(all, s)
	}
	t.mu.Unlock()
	for _, s := range all {
		s.flushFiles()
	}
}

func (t *sessionTable) find(id string) *sup {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

func (t *sessionTable) remove(s *sup) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[s.spec.ID] == s {
		delete(t.byID, s.spec.ID)
	}
}

// close removes the host's socket (the host is exiting).
func (t *sessionTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ln != nil {
		t.ln.Close()
		os.Remove(t.socket)
		t.ln = nil
	}
}
