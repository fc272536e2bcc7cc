package supervisor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// What a shared supervisor shares with the rest of the package on every
// system (shared supervisor.go is the shared supervisor itself, where there are shared supervisors).

// ErrNeedsCgroup is Shared.Commit's error for a session the shared supervisor cannot
// contain (it has no cgroup to give it); a single-session supervisor can.
var ErrNeedsCgroup = errors.New("no session cgroup: a shared supervisor cannot contain this session")

// ErrSharedGone is Shared.Commit's error when the shared supervisor process is gone or has
// been retired; the session was not started.
var ErrSharedGone = errors.New("shared supervisor is gone")

// ErrSharedDied is wrapped by Shared.Commit's error when the shared supervisor died after
// it was handed the session: the command may have started (its meta.json
// says), so it must not simply be started again elsewhere.
var ErrSharedDied = errors.New("shared supervisor died")

// sharedRetired is closed when the engine has closed the shared supervisor's socket:
// sessions then finish without delay.
var sharedRetired = make(chan struct{})

// errNoSession answers a request for a session the socket does not serve.
const errNoSession = "no such session here"

// sharedSessions are the sessions of this process when it is a shared supervisor, served
// on one control socket: a socket per session costs an inode on every
// exec.
var sharedSessions = &sessionTable{byID: map[string]*sup{}}

type sessionTable struct {
	mu     sync.Mutex
	byID   map[string]*sup
	ln     net.Listener
	socket string
}

// add serves s on the shared supervisor's socket, which is opened next to the first
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

// close removes the shared supervisor's socket (the shared supervisor is exiting).
func (t *sessionTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ln != nil {
		t.ln.Close()
		os.Remove(t.socket)
		t.ln = nil
	}
}
