package engine

import (
	"errors"
	"os"
	"sync"
	"time"

	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/store/approvals"
)

// state is state.json, written only by the engine.
type state struct {
	Agent        string           `json:"agent"`
	Command      string           `json:"command"`
	Name         string           `json:"name"`
	Cwd          string           `json:"cwd"`
	Host         string           `json:"host"`
	NodeID       string           `json:"nodeId,omitempty"`
	PTY          bool             `json:"pty"`
	CreatedAt    int64            `json:"createdAt"`
	TimeoutSec   float64          `json:"timeoutSec,omitempty"`
	Backgrounded bool             `json:"backgrounded"`
	Retained     bool             `json:"retained"`
	Hidden       bool             `json:"hidden"`
	DrainCursors map[string]int64 `json:"drainCursors,omitempty"`
	ObservedEnd  bool             `json:"observedEnd"`
	AgentEnded   bool             `json:"agentEnded"` // ended by the agent's kill/remove: no notice
	// PendingApprovalID is set while the session is reserved by an open
	// approval request (no process yet); ApprovalID names the approval of
	// a gated run.
	PendingApprovalID string `json:"pendingApprovalId,omitempty"`
	ApprovalID        string `json:"approvalId,omitempty"`
	// Gated is set for runs that passed the policy gate.
	Gated       bool        `json:"gated,omitempty"`
	Notice      noticeState `json:"notice"`
	PollBackoff int         `json:"pollBackoff"`
	// LedgerExec and LedgerEnd say the session's exec and end records
	// are in the ledger: an engine that finds the session ended with
	// the first and not the second records its end (observedEnd).
	LedgerExec bool `json:"ledgerExec,omitempty"`
	LedgerEnd  bool `json:"ledgerEnd,omitempty"`
	// Restored says what the run changed of the paths the sandbox
	// protects and what conch did about it ("" for nothing).
	Restored string `json:"restored,omitempty"`
}

type noticeState struct {
	Queued    bool `json:"queued"`
	Delivered bool `json:"delivered"`
}

// session is the engine's record of one session. The engine learns about
// the process only from its supervisor (events, control socket) and the
// files of the session directory.
type session struct {
	id    string
	dir   string
	jdir  string // its journal: dir, or dir/journal for an older session
	agent string // owner; immutable

	mu     sync.Mutex // guards the fields below
	st     state
	meta   proto.Meta
	cursor int64       // newest known journal end
	exit   *proto.Exit // final end state, nil while running
	pid    int
	socket string
	start  time.Time
	change chan struct{} // closed and replaced on every cursor or state change

	lastOutput time.Time // when the cursor last moved
	lastInput  time.Time // when the agent last wrote input

	approval   *approvals.Request // open approval request while pending
	claimed    bool               // a decision (or a withdrawal) is being applied
	pendingRun *pendingRun        // what the approved run needs (memory only)
	approvalID string             // approval of a gated run
	release    func()             // tells its shared supervisor the directory goes (nil: none)
	saveFailed func(error)        // told of a failed write of state.json (nil: nobody); immutable
	trimmed    bool               // the journal quota trimmed its journal (the agent was told)
	guard      *sandbox.Guard     // the sandbox's protected paths, checked once at the end (memory only; nil: none)
	// drawsScreen: the running PTY session was seen drawing a full
	// screen; its results show the screen from then on.
	drawsScreen bool

	ended chan struct{} // closed once exit is set
}

func newSession(id, dir, agent string) *session {
	return &session{id: id, dir: dir, jdir: dir, agent: agent, change: make(chan struct{}), ended: make(chan struct{})}
}

// newSession is newSession whose failed writes of state.json the engine
// logs and counts (writeFailed).
func (e *Engine) newSession(id, dir, agent string) *session {
	s := newSession(id, dir, agent)
	s.saveFailed = func(err error) { e.writeFailed("state", id, err) }
	return s
}

// changed returns a channel that is closed at the next change.
func (s *session) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.change
}

// notifyLocked wakes waiters; s.mu must be held.
func (s *session) notifyLocked() {
	close(s.change)
	s.change = make(chan struct{})
}

func (s *session) setCursor(c int64) {
	s.mu.Lock()
	if c > s.cursor {
		s.cursor = c
		s.lastOutput = time.Now()
		s.notifyLocked()
	}
	s.mu.Unlock()
}

// finish records the final end state once.
func (s *session) finish(ex proto.Exit) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exit != nil {
		return false
	}
	s.exit = &ex
	if ex.OutputBytes > s.cursor {
		s.cursor = ex.OutputBytes
	}
	s.notifyLocked()
	close(s.ended)
	return true
}

func (s *session) snapshot() (state, *proto.Exit, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st, s.exit, s.cursor
}

func (s *session) running() bool {
	select {
	case <-s.ended:
		return false
	default:
		return true
	}
}

// createState writes the first state.json of a new session directory.
func (s *session) createState() error {
	return proto.CreateState(s.dir, s.st)
}

// saveLocked writes state.json; s.mu must be held. A failed write (but
// for a directory already removed) is also told to saveFailed; the state
// in memory stays whole, and the next save writes all of it.
func (s *session) saveLocked() error {
	err := proto.WriteState(s.dir, s.st)
	if err != nil && s.saveFailed != nil && !errors.Is(err, os.ErrNotExist) {
		s.saveFailed(err)
	}
	return err
}

// markLedger records what the ledger holds of the session in its state
// file, if the session's directory is still its own (a foreground
// session's may be gone).
func (s *session) markLedger(f func(*state)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.st)
	if _, err := os.Stat(s.dir); err == nil {
		s.saveLocked()
	}
}

func (s *session) update(f func(*state)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.st)
	s.saveLocked()
}

// claim reserves the right to resolve the session's open approval: the
// first of a decision, a timeout and a withdrawal wins.
func (s *session) claim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed || s.approval == nil {
		return false
	}
	s.claimed = true
	return true
}

// started reports whether the session's supervisor runs (it has a pid).
func (s *session) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid != 0
}

// pending reports whether the session waits for an approval.
func (s *session) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.approval != nil
}

func (s *session) journal() string { return s.jdir }
