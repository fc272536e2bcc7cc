package supervisor

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/term/keys"
	"github.com/conchsh/conch/internal/term/vt"
)

// Main is the entry point of `conch supervise --home H [--session ID]` and
// of `conch supervise --home H --host`.
//
// A single-session supervisor reads the Spec from fd 3, reports readiness
// on fd 4 and returns the process exit code once the session has ended and
// exit.json is written. Without --session it is a warm spare: it waits for
// a spec naming any session (and exits quietly when fd 3 closes without
// one).
//
// A shared supervisor (--host) supervises many sessions in one process: fd 3 is a
// socket on which each session arrives as its own spec and ready pipes
// (see Shared). It exits once the socket is closed and its sessions ended.
func Main(args []string) int {
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	home := fs.String("home", "", "conch home")
	id := fs.String("session", "", "session id (default: the spec's)")
	host := fs.Bool("host", false, "supervise the sessions that arrive on the socket on fd 3")
	if err := fs.Parse(args); err != nil || *home == "" {
		fmt.Fprintln(os.Stderr, "usage: conch supervise --home DIR [--session ID | --host] (internal; started by the engine)")
		return 2
	}
	specIn, readyOut := sessionPipes(*host)
	// Whatever else the engine inherited without close-on-exec (from an
	// MCP client, a shell, a service manager) came along too; none of it
	// may reach the command, least of all a sandboxed one.
	closeOnExecFrom(5)
	// No signal.Ignore(SIGPIPE): an ignored signal stays ignored across
	// exec, and commands must get SIGPIPE as in a terminal (`yes | head`).
	// Go returns EPIPE for writes to a closed pipe other than stdout and
	// stderr, which here are /dev/null or a log.
	becomeSubreaper()
	if *host {
		return sharedMain(*home, specIn)
	}
	if specIn == nil || readyOut == nil {
		fmt.Fprintln(os.Stderr, "conch supervise: fd 3 and 4 must be set up by the engine")
		return 2
	}
	return runSession(*home, *id, specIn, nil, readyOut, false)
}

// errStartExpired is the start failure of a spec read after its StartBy.
var errStartExpired = errors.New("the engine stopped waiting for this start before the supervisor could run it: not started")

// runSession reads one spec from specIn, starts its command, reports on
// readyOut and supervises the session to its end. In a shared supervisor (shared) the
// session must get its own cgroup: without one its processes could not be
// told from those of the shared supervisor's other sessions.
// runSession runs the session whose spec is read from specIn or, when
// specIn is nil, is specBytes.
func runSession(home, id string, specIn *os.File, specBytes []byte, readyOut *os.File, shared bool) int {
	var spec proto.Spec
	var err error
	if specIn != nil {
		err = json.NewDecoder(specIn).Decode(&spec)
		specIn.Close()
	} else {
		err = json.Unmarshal(specBytes, &spec)
	}
	if errors.Is(err, io.EOF) && id == "" && !shared {
		return 0 // a spare that was never used
	}
	if err == nil && spec.V != proto.ProtocolVersion {
		err = fmt.Errorf("spec version %d, want %d", spec.V, proto.ProtocolVersion)
	}
	if err == nil && id != "" && spec.ID != id {
		err = fmt.Errorf("spec is for session %q, not %q", spec.ID, id)
	}
	if err == nil && (spec.ID == "" || spec.ID != filepath.Base(spec.ID) || spec.ID[0] == '.') {
		err = fmt.Errorf("invalid session id %q", spec.ID)
	}
	if err == nil && shared && spec.NoCgroup {
		err = ErrNeedsCgroup
	}
	if err == nil && spec.StartBy > 0 && time.Now().UnixMilli() > spec.StartBy {
		// The engine has given up on this start and answered its call:
		// starting the command now would run it unknown to anyone.
		err = errStartExpired
	}
	if err != nil {
		json.NewEncoder(readyOut).Encode(ready{Error: "read spec: " + err.Error(), Code: readyCode(err)})
		readyOut.Close()
		return 1
	}
	s := &sup{spec: spec, dir: proto.SessionDir(home, spec.ID), shared: shared, done: make(chan struct{}), mainExited: make(chan struct{}), finalSet: make(chan struct{}), releasedCh: make(chan struct{})}
	if err := s.launch(); err != nil {
		json.NewEncoder(readyOut).Encode(ready{Error: err.Error(), Code: readyCode(err), NoSpace: errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)})
		readyOut.Close()
		return 1
	}
	// readyOut stays open as the first subscriber: the engine that
	// started this session learns cursors and the end state without
	// dialling.
	if err := json.NewEncoder(readyOut).Encode(ready{OK: true, PID: s.cmd.Process.Pid, Socket: s.socket, Warnings: s.warnings, Meta: s.meta}); err == nil {
		s.addSubscriber(readyOut)
	} else {
		readyOut.Close()
		if shared {
			// The engine gave up on this launch (its ready timeout):
			// nobody knows the command runs, so it must not.
			s.logf("the engine did not take the ready report (%v); killing the session", err)
			s.kill(proto.KilledByShutdown, 0)
		}
	}
	s.run()
	return 0
}

// sup is one running supervisor.
type sup struct {
	spec proto.Spec
	dir  string
	// shared is set when the supervisor is a shared supervisor of many sessions.
	shared bool

	cmd     *exec.Cmd
	cont    *containment
	started time.Time
	// warnings are sandbox limits that are not enforced.
	warnings []string
	// memLimit is the memory limit in force (bytes, 0: none), named in
	// the reason of an out-of-memory kill; pidsLimit the task limit.
	memLimit, pidsLimit float64
	// hits are the session's limit events counted when its main process
	// ended (limitHits), before the end's sweep of what it left (which
	// refuses forks on purpose); guarded by mu.
	hits *proto.LimitHits

	jmu sync.Mutex // guards j and sum
	j   *journal.Writer
	sum hash.Hash

	cursor     atomic.Int64
	lastOutput atomic.Int64 // unix ns
	// journalErr is the journal's last write error while output is held
	// back ("" or nil when writable).
	journalErr atomic.Value
	// abandon is set when output that cannot be journaled is given up
	// (a kill, or the wait for space after the end ran out); unrecorded
	// counts the bytes given up, reported in exit.json.
	abandon    atomic.Bool
	unrecorded atomic.Int64

	outputs sync.WaitGroup // the output pumps
	readers []*os.File     // their pipes (nil with a PTY)
	ptmx    *os.File       // PTY master, or nil (Windows: the pseudoconsole's output)
	slave   *os.File       // our copy of the PTY slave, held until the command exits (holdPTYSlave), or nil
	// pty is the system's own state of a PTY session (ptyState; Windows:
	// the pseudoconsole and its input pipe).
	pty ptyState
	// term emulates the PTY's screen (nil without a PTY); answered is
	// closed when answer, which writes its replies to ptmx, returns.
	term     *vt.Terminal
	answered chan struct{}
	wmu      sync.Mutex // serialises writes to the command's input

	mu         sync.Mutex // guards the fields below
	stdin      *os.File   // pipe write end (Stdin "open"), nil once closed
	stdinState string
	modes      keys.Tracker
	killedBy   proto.KilledBy
	timedOut   bool
	killing    bool
	killCount  int // descendants signalled by a kill sequence
	subs       []*subscriber
	final      *proto.Exit

	mainExited chan struct{} // closed when the main process was reaped
	mainStatus syscall.WaitStatus
	done       chan struct{} // closed when the end state is final
	finalSet   chan struct{} // closed when final is set

	meta *proto. // meta.json's content
		Meta

	// A shared supervisor writes a session's meta.json and state.json only once it
	// has run for filesDelay, when the engine goes away or asks for it,
	// or when it ends without the engine having released it. A
	// foreground call that ends at once then costs no file at all.
	fileMu     sync.Mutex
	filesDue   bool          // meta.json and state.json are not written yet
	released   bool          // the engine is done with the session: no more files
	releasedCh chan struct{} // closed by release

	exitMu      sync.Mutex  // serialises exit.json writes
	exitFinal   bool        // the final exit.json is written
	exitWritten bool        // an exit.json (provisional or final) is written
	exitDue     *proto.Exit // a record that could not be written yet (a full disk)

	// Files that could not be written (a full disk) are kept in memory
	// and retried by retryWrites until they are on disk; the supervisor
	// does not go before (see owed).
	filesOwed bool // meta.json and state.json; guarded by fileMu
	retryMu   sync.Mutex
	retryDone chan struct{} // closed when nothing is owed any more; nil if never

	ln net.Listener
	// socket is where the session is served: its own socket, or its
	// shared supervisor's.
	socket string
}

func (s *sup) logf(format string, args ...any) {
	f, err := os.OpenFile(proto.LogPath(s.dir), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s supervisor[%d] %s\n", time.Now().UTC().Format(time.RFC3339Nano), os.Getpid(), fmt.Sprintf(format, args...))
	f.Close()
}
