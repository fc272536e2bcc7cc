package supervisor

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/conchsh/conch/internal/unixsock"
	"hash"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/journal"
	"github.com/conchsh/conch/internal/keys"
	"github.com/conchsh/conch/internal/vt"
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
// A host (--host) supervises many sessions in one process: fd 3 is a
// socket on which each session arrives as its own spec and ready pipes
// (see Host). It exits once the socket is closed and its sessions ended.
func Main(args []string) int {
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	home := fs.String("home", "", "conch home")
	id := fs.String("session", "", "session id (default: the spec's)")
	host := fs.Bool("host", false, "supervise the sessions that arrive on the socket on fd 3")
	if err := fs.Parse(args); err != nil || *home == "" {
		fmt.Fprintln(os.Stderr, "usage: conch supervise --home DIR [--session ID | --host] (internal; started by the engine)")
		return 2
	}
	// fd 3 and 4 come without close-on-exec; the command and its
	// children must not inherit them (a daemon holding fd 4 would keep
	// the engine's event pipe open after the supervisor died).
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	// Whatever else the engine inherited without close-on-exec (from an
	// MCP client, a shell, a service manager) came along too; none of it
	// may reach the command, least of all a sandboxed one.
	closeOnExecFrom(5)
	// No signal.Ignore(SIGPIPE): an ignored signal stays ignored across
	// exec, and commands must get SIGPIPE as in a terminal (`yes | head`).
	// Go returns EPIPE for writes to a closed pipe other than stdout and
	// stderr, which here are /dev/null or a log.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	if *host {
		return hostMain(*home, os.NewFile(3, "host"))
	}
	specIn := os.NewFile(3, "spec")
	readyOut := os.NewFile(4, "ready")
	if specIn == nil || readyOut == nil {
		fmt.Fprintln(os.Stderr, "conch supervise: fd 3 and 4 must be set up by the engine")
		return 2
	}
	return runSession(*home, *id, specIn, nil, readyOut, false)
}

// runSession reads one spec from specIn, starts its command, reports on
// readyOut and supervises the session to its end. In a host (shared) the
// session must get its own cgroup: without one its processes could not be
// told from those of the host's other sessions.
// runSession runs the session whose spec is read from specIn or, when
// specIn is nil, is specBytes.
func runSession(home, id string, specIn *os.File, specBytes []byte, readyOut *os.File, shared bool) int {
	var spec Spec
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
	if err == nil && spec.V != ProtocolVersion {
		err = fmt.Errorf("spec version %d, want %d", spec.V, ProtocolVersion)
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
	if err != nil {
		json.NewEncoder(readyOut).Encode(ready{Error: "read spec: " + err.Error(), Code: readyCode(err)})
		readyOut.Close()
		return 1
	}
	s := &sup{spec: spec, dir: SessionDir(home, spec.ID), shared: shared, done: make(chan struct{}), mainExited: make(chan struct{}), finalSet: make(chan struct{}), releasedCh: make(chan struct{})}
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
			s.kill(KilledByShutdown, 0)
		}
	}
	s.run()
	return 0
}

// closeOnExecFrom marks every descriptor from lo up close-on-exec.
func closeOnExecFrom(lo int) {
	if unix.CloseRange(uint(lo), ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Kernels before 5.11: walk the open descriptors.
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= lo {
			syscall.CloseOnExec(fd)
		}
	}
}

// sup is one running supervisor.
type sup struct {
	spec Spec
	dir  string
	// shared is set when the supervisor is a host of many sessions.
	shared bool

	cmd     *exec.Cmd
	cont    *containment
	started time.Time
	// warnings are sandbox limits that are not enforced.
	warnings []string

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
	ptmx    *os.File       // PTY master, or nil
	// term emulates the PTY's screen (nil without a PTY); answered is
	// closed when answer, which writes its replies to ptmx, returns.
	term     *vt.Terminal
	answered chan struct{}
	wmu      sync.Mutex // serialises writes to the command's input

	mu         sync.Mutex // guards the fields below
	stdin      *os.File   // pipe write end (Stdin "open"), nil once closed
	stdinState string
	modes      keys.Tracker
	killedBy   KilledBy
	timedOut   bool
	killing    bool
	killCount  int // descendants signalled by a kill sequence
	subs       []*subscriber
	final      *Exit

	mainExited chan struct{} // closed when the main process was reaped
	mainStatus syscall.WaitStatus
	done       chan struct{} // closed when the end state is final
	finalSet   chan struct{} // closed when final is set

	meta *Meta // meta.json's content

	// A host writes a session's meta.json and state.json only once it
	// has run for filesDelay, when the engine goes away or asks for it,
	// or when it ends without the engine having released it. A
	// foreground call that ends at once then costs no file at all.
	fileMu     sync.Mutex
	filesDue   bool          // meta.json and state.json are not written yet
	released   bool          // the engine is done with the session: no more files
	releasedCh chan struct{} // closed by release

	exitMu      sync.Mutex // serialises exit.json writes
	exitFinal   bool       // the final exit.json is written
	exitWritten bool       // an exit.json (provisional or final) is written
	exitDue     *Exit      // a record that could not be written yet (a full disk)

	// Files that could not be written (a full disk) are kept in memory
	// and retried by retryWrites until they are on disk; the supervisor
	// does not go before (see owed).
	filesOwed bool // meta.json and state.json; guarded by fileMu
	retryMu   sync.Mutex
	retryDone chan struct{} // closed when nothing is owed any more; nil if never

	ln net.Listener
	// socket is where the session is served: its own socket, or its
	// host's.
	socket string
}

func (s *sup) logf(format string, args ...any) {
	f, err := os.OpenFile(LogPath(s.dir), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s supervisor[%d] %s\n", time.Now().UTC().Format(time.RFC3339Nano), os.Getpid(), fmt.Sprintf(format, args...))
	f.Close()
}

func (s *sup) launch() (retErr error) {
	spec := s.spec
	if len(spec.Argv) == 0 {
		return errors.New("empty argv")
	}
	// A launch that fails leaves nothing behind: in a host, which lives
	// on, leaked descriptors and cgroups would add up.
	var opened []*os.File
	defer func() {
		if retErr == nil {
			return
		}
		for _, f := range opened {
			f.Close() // a second Close of an *os.File is harmless
		}
		if s.cont != nil {
			s.cont.remove()
		}
		if s.j != nil {
			s.j.Close()
		}
	}()
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("session dir: %w", err)
	}
	// Our own stderr (a Go panic, a runtime fatal error) goes to
	// supervisor.log instead of /dev/null. (A host's goes to its own log.)
	if !s.shared {
		if f, err := os.OpenFile(LogPath(s.dir), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
			unix.Dup2(int(f.Fd()), 2)
			f.Close()
		}
	}
	// The session is new (the engine reserves its directory exclusively),
	// and the directory may be one the engine reused, still locked by the
	// journal of an ended session whose supervisor has not closed it yet:
	// New skips the recovery and the lock.
	j, err := journal.Create(s.dir, journal.Options{MaxBytes: spec.JournalMaxBytes, HeadBytes: spec.JournalHeadBytes, New: true})
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	s.j = j
	s.sum = sha256.New()
	s.cursor.Store(j.Cursor())

	s.cont = &containment{}
	if !spec.NoCgroup {
		// Session ids are unique per home only: qualify the cgroup name
		// with the supervisor's pid, which is unique while it lives.
		s.cont = newCgroup(fmt.Sprintf("%s-%d", spec.ID, os.Getpid()))
	}
	if s.shared && s.cont.cgroupDir() == "" {
		return ErrNeedsCgroup
	}
	var sbMeta *SandboxMeta
	var blockW *os.File
	if sb := spec.Sandbox; sb != nil {
		sbMeta = &SandboxMeta{Backend: sb.Backend, Scope: sb.Scope, Layers: sb.Layers}
		if !spec.NoCgroup {
			sbMeta.Limits, s.warnings = s.cont.setLimits(fmt.Sprintf("%s-%d", spec.ID, os.Getpid()), sb.MemoryBytes, sb.Pids, sb.CPUs)
		} else if sb.MemoryBytes > 0 || sb.Pids > 0 || sb.CPUs > 0 {
			s.warnings = append(s.warnings, "Warning: sandbox.limits are not enforced (cgroups are disabled for this session).")
		}
		sbMeta.Unenforced = s.warnings
	}

	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	if cmd.Err != nil {
		// exec.Command looked the program up in our own PATH; let the
		// kernel report errors for absolute paths and keep the text.
		cmd.Err = nil
		cmd.Path = spec.Argv[0]
	}
	var childEnds []*os.File
	var readers []*os.File
	if spec.PTY {
		ptmx, tty, err := pty.Open()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrOpenPTY, err)
		}
		opened = append(opened, ptmx, tty)
		cols, rows := spec.Cols, spec.Rows
		if cols <= 0 {
			cols = 120
		}
		if rows <= 0 {
			rows = 30
		}
		pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if spec.Sandbox != nil && spec.Sandbox.CttyInside {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		s.ptmx = ptmx
		s.term = vt.New(cols, rows)
		s.stdinState = "pty"
		childEnds = append(childEnds, tty)
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		for i := 0; i < 2; i++ {
			r, w, err := os.Pipe()
			if err != nil {
				return fmt.Errorf("pipe: %w", err)
			}
			opened = append(opened, r, w)
			// Not r.Fd(): that would make the pipe blocking, so that a
			// pump would hold an OS thread in read(2) and Close could
			// not interrupt it.
			if rc, err := r.SyscallConn(); err == nil {
				rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
			}
			readers = append(readers, r)
			childEnds = append(childEnds, w)
		}
		cmd.Stdout, cmd.Stderr = childEnds[0], childEnds[1]
		if spec.Stdin == "open" {
			r, w, err := os.Pipe()
			if err != nil {
				return fmt.Errorf("pipe: %w", err)
			}
			opened = append(opened, r, w)
			cmd.Stdin = r
			childEnds = append(childEnds, r)
			s.stdin = w
			s.stdinState = "open"
		} else {
			null, err := os.Open(os.DevNull)
			if err != nil {
				return err
			}
			opened = append(opened, null)
			cmd.Stdin = null
			childEnds = append(childEnds, null)
			s.stdinState = "closed"
		}
	}
	if spec.Sandbox != nil && spec.Sandbox.BlockFD {
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("pipe: %w", err)
		}
		opened = append(opened, r)
		cmd.ExtraFiles = []*os.File{r}
		childEnds = append(childEnds, r)
		blockW = w
		for _, p := range spec.Sandbox.Files {
			f, err := os.Open(p)
			if err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
			opened = append(opened, f)
			cmd.ExtraFiles = append(cmd.ExtraFiles, f)
			childEnds = append(childEnds, f)
		}
		defer func() {
			if blockW != nil {
				blockW.Close()
			}
		}()
	}
	if fd := s.cont.cgroupFD(); fd >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = fd
		defer unix.Close(fd)
	}

	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	// The reaper must know the main process before it can be reaped.
	reap.start()
	reap.startMu.RLock()
	s.started = time.Now()
	err = cmd.Start() // the one place conch starts a command
	if err != nil && cmd.SysProcAttr.UseCgroupFD && !isSpawnError(err) {
		// Kernels older than 5.7 lack CLONE_INTO_CGROUP: start outside
		// and move the child right after; the subreaper covers the gap.
		s.logf("start in cgroup failed (%v); moving the child instead", err)
		retry := exec.Command(spec.Argv[0], spec.Argv[1:]...)
		retry.Path, retry.Err = cmd.Path, nil
		retry.Env, retry.Dir = cmd.Env, cmd.Dir
		retry.Stdin, retry.Stdout, retry.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
		retry.ExtraFiles = cmd.ExtraFiles
		attr := *cmd.SysProcAttr
		attr.UseCgroupFD = false
		retry.SysProcAttr = &attr
		cmd = retry
		if err = cmd.Start(); err == nil {
			os.WriteFile(filepath.Join(s.cont.v2, "cgroup.procs"), []byte(fmt.Sprint(cmd.Process.Pid)), 0)
		}
	}
	if err == nil {
		reap.watch(cmd.Process.Pid, func(ws syscall.WaitStatus) {
			s.mainStatus = ws
			close(s.mainExited)
		})
	}
	reap.startMu.RUnlock()
	for _, f := range childEnds {
		f.Close()
	}
	if err != nil {
		signal.Stop(term)
		return fmt.Errorf("spawn %s: %w", spec.Argv[0], unwrapPathErr(err))
	}
	s.cmd = cmd
	pid := cmd.Process.Pid
	s.cont.pgid = pid
	s.cont.adopt(pid)
	if blockW != nil {
		// The child waits on fd 3: put its whole tree (bwrap may have
		// forked already) into the limit cgroups, then let it go.
		// A fork racing with a move can leave the child behind: list
		// again until a listing holds only processes moved before it.
		moved := map[int]bool{}
		for i := 0; i < 100; i++ {
			var fresh []int
			for _, p := range append(s.cont.members(), pid) {
				if !moved[p] {
					fresh = append(fresh, p)
				}
			}
			if len(fresh) == 0 {
				break
			}
			if err := s.cont.place(fresh); err != nil {
				s.logf("place in limit cgroups: %v", err)
			}
			for _, p := range fresh {
				moved[p] = true
			}
		}
		blockW.Write([]byte{1})
		blockW.Close()
		blockW = nil
	}

	if s.ptmx != nil {
		s.outputs.Add(1)
		go s.pump(s.ptmx, journal.Stdout)
		s.answered = make(chan struct{})
		go s.answer()
	} else {
		s.outputs.Add(2)
		s.readers = readers
		go s.pump(readers[0], journal.Stdout)
		go s.pump(readers[1], journal.Stderr)
	}

	if err := s.listen(); err != nil {
		s.logf("control socket: %v", err)
	}
	if s.socket == "" {
		s.socket = spec.Socket
	}
	meta := Meta{
		V: ProtocolVersion, ID: spec.ID, Agent: spec.Agent, Name: spec.Name, Command: spec.Command,
		Argv: spec.Argv, Cwd: spec.Dir, Host: spec.Host, HostReason: spec.HostReason, PTY: spec.PTY,
		Cols: spec.Cols, Rows: spec.Rows, Stdin: s.stdinState, State: "running",
		StartedAt: s.started.UnixMilli(), PID: pid, PGID: pid, PIDStartTime: StartTime(pid),
		Cgroup: s.cont.describe(), SupervisorPID: os.Getpid(), SupervisorStartTime: ownStartTime(),
		Socket: s.socket, KillGraceMs: spec.KillGraceMs, IdempotencyKey: spec.IdempotencyKey,
		Fingerprint: spec.Fingerprint, EnvKeys: spec.EnvKeys, Sandbox: sbMeta,
	}
	if spec.TimeoutMs > 0 {
		meta.TimeoutAt = s.started.UnixMilli() + spec.TimeoutMs
		timeout := time.AfterFunc(time.Duration(spec.TimeoutMs)*time.Millisecond, func() {
			s.kill(KilledByTimeout, s.grace())
		})
		// In a host an unfired timer would keep the ended session
		// (buffers and all) in memory until it fired.
		go func() {
			<-s.done
			timeout.Stop()
		}()
	}
	s.mu.Lock() // the socket already serves op meta
	s.meta = &meta
	s.mu.Unlock()
	if s.shared {
		s.fileMu.Lock()
		s.filesDue = true
		s.fileMu.Unlock()
		select {
		case <-hostRetired:
			s.flushFiles()
		default:
			time.AfterFunc(filesDelay, s.flushFiles)
		}
	} else if err := s.writeFiles(); err != nil {
		s.logf("%v", err)
		s.fileMu.Lock()
		s.filesOwed = true
		s.fileMu.Unlock()
		s.retryWrites()
	}
	go func() {
		defer signal.Stop(term)
		select {
		case <-term:
			s.kill(KilledByShutdown, s.grace())
		case <-s.done:
		}
	}()
	return nil
}

// filesDelay is how long a host's session runs before its meta.json and
// state.json are written.
const filesDelay = 250 * time.Millisecond

// writeFiles writes meta.json, then state.json from the spec unless the
// engine has written one (a torn pair can only lack state.json, which the
// engine recovers from meta.json).
func (s *sup) writeFiles() error {
	if err := WriteJSON(MetaPath(s.dir), s.meta); err != nil {
		return fmt.Errorf("write meta.json: %w", err)
	}
	if len(s.spec.State) > 0 {
		if err := CreateJSON(filepath.Join(s.dir, "state.json"), s.spec.State); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("write state.json: %w", err)
		}
	}
	return nil
}

// flushFiles writes a host session's meta.json and state.json if they are
// due and the engine has not released the session.
func (s *sup) flushFiles() {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if !s.filesDue || s.released {
		return
	}
	s.filesDue = false
	if err := s.writeFiles(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logf("%v", err)
		s.filesOwed = true
		s.retryWrites()
	}
}

// retryWrites starts, once, the retry of the files that could not be
// written: every 100 ms at first, then every 5 s, until all are on disk
// or the engine has removed the session. Meanwhile the supervisor keeps
// them in memory and serves them on its socket.
func (s *sup) retryWrites() {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	if s.retryDone != nil {
		return
	}
	done := make(chan struct{})
	s.retryDone = done
	go func() {
		defer close(done)
		wait := 100 * time.Millisecond
		for {
			select {
			case <-time.After(wait):
			case <-s.releasedCh:
				return
			}
			if _, err := os.Stat(s.dir); err != nil {
				return // the engine removed the session
			}
			if s.payOwed() {
				s.logf("the files kept in memory are written")
				return
			}
			wait = min(2*wait, 5*time.Second)
		}
	}()
}

// payOwed writes what is owed and reports whether nothing is left.
func (s *sup) payOwed() bool {
	paid := true
	s.fileMu.Lock()
	if s.filesOwed && !s.released {
		if err := s.writeFiles(); err != nil {
			paid = false
		} else {
			s.filesOwed = false
		}
	}
	s.fileMu.Unlock()
	s.exitMu.Lock()
	if s.writeExitLocked() != nil {
		paid = false
	}
	s.exitMu.Unlock()
	return paid
}

// owed waits until the files kept in memory are written (or the session
// was removed): a supervisor that went before would leave its session
// lost, or unknown, after an engine restart. It reports whether anything
// was owed.
func (s *sup) owed() bool {
	s.retryMu.Lock()
	done := s.retryDone
	s.retryMu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
	}
	s.logf("waiting for disk space to write the end state kept in memory")
	<-done
	return true
}

// release records that the engine is done with the session (it removes
// its directory): nothing more is written there.
func (s *sup) release() {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if !s.released {
		s.released = true
		close(s.releasedCh)
	}
}

func (s *sup) isReleased() bool {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	return s.released
}

// isSpawnError reports errors that are about the command itself (missing
// program, permission, working directory), which a retry cannot fix.
func isSpawnError(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.ENOTDIR)
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

func (s *sup) grace() time.Duration {
	return time.Duration(s.spec.KillGraceMs) * time.Millisecond
}

// pump copies one output stream into the journal.
// pumpBufs are the pumps' read buffers: a host runs hundreds of short
// sessions a second, and two fresh 64 KiB buffers each were most of its
// allocation.
var pumpBufs = sync.Pool{New: func() any { return new([64 << 10]byte) }}

func (s *sup) pump(r *os.File, stream journal.Stream) {
	defer s.outputs.Done()
	bp := pumpBufs.Get().(*[64 << 10]byte)
	defer pumpBufs.Put(bp)
	buf := bp[:]
	for {
		n, err := r.Read(buf)
		if n > 0 {
			end := s.record(stream, buf[:n])
			if s.ptmx != nil {
				s.mu.Lock()
				s.modes.Write(buf[:n])
				s.mu.Unlock()
				s.term.Write(buf[:n])
			}
			s.cursor.Store(end)
			s.lastOutput.Store(time.Now().UnixNano())
			s.kick()
		}
		if err != nil {
			// EOF on a pipe, EIO on a PTY master once every slave is closed.
			if r != s.ptmx {
				r.Close()
			}
			return
		}
	}
}

// record journals p, holding on to what cannot be written yet: while the
// journal fails (a full disk), the pump retries with backoff and reads
// nothing more, so the command blocks on its output instead of losing it,
// and the status says why (Status.JournalError). Output is lost only if
// the supervisor has to end while it still holds some (see run).
func (s *sup) record(stream journal.Stream, p []byte) int64 {
	wait := 50 * time.Millisecond
	for {
		if s.abandon.Load() {
			s.unrecorded.Add(int64(len(p)))
			return s.j.Cursor()
		}
		s.jmu.Lock()
		start := s.j.Cursor()
		end, err := s.j.Append(stream, p)
		s.sum.Write(p[:end-start])
		s.jmu.Unlock()
		p = p[end-start:]
		if errors.Is(err, journal.ErrClosed) {
			// The session has ended: nothing more can be recorded.
			return end
		}
		if err == nil || len(p) == 0 {
			// All of p is recorded (an error now is a failed fsync,
			// which the next Append retries).
			if old, _ := s.journalErr.Swap("").(string); old != "" {
				s.logf("journal writable again")
			}
			return end
		}
		if old, _ := s.journalErr.Swap(err.Error()).(string); old == "" {
			s.logf("journal append: %v; holding %d bytes of output until it can be written", err, len(p))
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// abandonOutput gives up output that cannot be journaled: the pumps read
// on and count what they drop (Exit.UnrecordedBytes).
func (s *sup) abandonOutput(why string) {
	if held, _ := s.journalErr.Load().(string); held != "" && !s.abandon.Swap(true) {
		s.logf("%s: output that cannot be journaled (%s) is given up", why, held)
	}
}

// run waits for the main process, settles output and descendants, and
// commits the end state.
func (s *sup) run() {
	<-s.mainExited
	end := time.Now()
	// The exit status is on disk before the settle, unless the end state
	// is final within 100 ms (the common case: that saves an inode and a
	// rename per session). A supervisor that dies in between leaves the
	// session lost instead of exited.
	provisional := s.exitRecord(end, 0, false)
	exitTimer := time.AfterFunc(100*time.Millisecond, func() { s.writeExitOnce(provisional, false) })
	defer exitTimer.Stop()

	settle := time.Duration(s.spec.SettleMs) * time.Millisecond
	if settle <= 0 {
		settle = 250 * time.Millisecond
	}
	pumped := make(chan struct{})
	go func() { s.outputs.Wait(); close(pumped) }()
	select {
	case <-pumped:
	case <-time.After(settle):
	}
	if held, _ := s.journalErr.Load().(string); held != "" {
		// Output is held back by a journal that cannot be written: give
		// the disk a chance to free up before the end state is final.
		s.mu.Lock()
		killed := s.killedBy != ""
		s.mu.Unlock()
		if killed {
			// A kill ends the session now: what the disk cannot take
			// is counted, not waited for.
			s.abandonOutput("killed")
		} else {
			s.logf("the command ended with output held back (%s); waiting up to 60 s for the journal", held)
			select {
			case <-pumped:
			case <-time.After(60 * time.Second):
				s.abandonOutput("no space after 60 s")
			}
		}
	}
	// Descendants left behind by a command that ended by itself get the
	// kill sequence too; a session never stays open because a grandchild
	// holds a pipe.
	s.mu.Lock()
	killing := s.killing
	s.mu.Unlock()
	left := 0
	if !killing {
		if s.spec.Sandbox != nil {
			// bwrap's own processes (the monitor, the namespace's init)
			// end right after the command: they are not leftovers.
			s.waitTreeGone(200 * time.Millisecond)
		}
		left = len(s.cont.members())
		if left > 0 {
			s.treeKill(s.grace())
		} else {
			s.killInside(s.grace())
		}
	} else {
		s.waitTreeGone(s.grace() + 2*time.Second)
	}
	if s.ptmx != nil {
		// All slaves are closed once the group is gone; reading to EIO
		// keeps the last bytes. A stray holder outside the tree must not
		// keep us open forever.
		select {
		case <-pumped:
		case <-time.After(2 * time.Second):
		}
		// The screen stays readable for the op screen; only the
		// replies stop.
		s.term.Close()
		<-s.answered
		s.ptmx.Close()
	}
	select {
	case <-pumped:
	case <-time.After(2 * time.Second):
		// A process outside the tree (it left the cgroup) still holds
		// a pipe: stop reading it, so the pumps end before the journal
		// closes.
		s.logf("output pipes still open 2s after the tree was killed; closing")
		for _, r := range s.readers {
			r.Close()
		}
		select {
		case <-pumped:
		case <-time.After(2 * time.Second):
			s.logf("output pumps did not end")
		}
	}
	s.mu.Lock()
	if s.stdin != nil {
		s.stdin.Close()
		s.stdin = nil
	}
	s.mu.Unlock()
	ex := s.exitRecord(end, left, true)
	exitTimer.Stop()
	// A host reports the end first and writes exit.json a moment later,
	// and only if the session's directory is still there then: a
	// foreground call's directory is removed by the engine as soon as
	// the result is out, and the file was a third of a host's disk work.
	// Until the file is written the host keeps the session, so an engine
	// that restarts meanwhile learns the end state from it instead.
	deferred := s.deferExit()
	if !deferred {
		s.writeExitOnce(ex, true)
	}
	s.mu.Lock()
	s.final = &ex
	subs := s.subs
	s.mu.Unlock()
	close(s.finalSet)
	for _, sub := range subs {
		sub.kickNow()
	}
	if !s.shared {
		s.persist()
	}
	// Give subscribers a moment to receive the end state.
	deadline := time.After(2 * time.Second)
	for _, sub := range subs {
		select {
		case <-sub.gone:
		case <-deadline:
		}
	}
	// The end state stays served on the socket until it is on disk.
	if !s.shared && s.owed() {
		Persist(ExitPath(s.dir))
	}
	if s.ln != nil {
		s.ln.Close()
		os.Remove(s.spec.Socket)
	}
	s.cont.remove()
	if s.shared {
		// A host makes the end durable a moment later, and not at all
		// for a session whose directory the engine has removed by then
		// (a foreground call that returned its result): on a busy
		// gateway those fsyncs were a tenth of the CPU. (The engine
		// renames a directory before it deletes it, so a directory
		// seen here takes no file after it is gone.)
		select {
		case <-time.After(250 * time.Millisecond):
		case <-hostRetired:
		case <-s.releasedCh:
		}
		s.flushFiles()
		if _, err := os.Stat(s.dir); err == nil && !s.isReleased() {
			if deferred {
				s.writeExitOnce(ex, true)
			}
			s.owed()
			s.persist()
		} else {
			s.jmu.Lock()
			s.j.CloseUnsynced()
			s.jmu.Unlock()
		}
		hostSessions.remove(s)
	}
	close(s.done)
}

// persist makes the journal and exit.json, which every process already
// sees, survive a machine crash too. (The engine may delete a foreground
// session's directory meanwhile; that is not an error.)
func (s *sup) persist() {
	s.jmu.Lock()
	if err := s.j.Close(); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.logf("journal close: %v", err)
	}
	s.jmu.Unlock()
	if err := Persist(ExitPath(s.dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.logf("persist exit.json: %v", err)
	}
}

func (s *sup) exitRecord(end time.Time, descendants int, final bool) Exit {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.mainStatus
	ex := Exit{
		EndedAt:    end.UnixMilli(),
		DurationMs: end.Sub(s.started).Milliseconds(),
		TimedOut:   s.timedOut,
		Final:      final,
	}
	switch {
	case ws.Exited():
		c := ws.ExitStatus()
		ex.ExitCode = &c
		ex.State = StateExited
	case ws.Signaled():
		name := unix.SignalName(ws.Signal())
		if name == "" {
			name = fmt.Sprintf("SIG%d", int(ws.Signal()))
		}
		ex.Signal = &name
		ex.State = StateSignaled
	}
	if s.killedBy != "" {
		by := string(s.killedBy)
		ex.KilledBy = &by
		ex.State = StateKilled
	}
	ex.DescendantsKilled = descendants + s.killCount
	s.jmu.Lock()
	ex.OutputBytes = s.j.Cursor()
	ex.DroppedBytes = s.j.Stat().DroppedBytes
	ex.UnrecordedBytes = s.unrecorded.Load()
	if final {
		ex.OutputSha256 = hex.EncodeToString(s.sum.Sum(nil))
	}
	s.jmu.Unlock()
	return ex
}

// writeExitOnce writes exit.json; once the final record is written, a
// provisional one no longer is.
func (s *sup) writeExitOnce(ex Exit, final bool) {
	s.exitMu.Lock()
	defer s.exitMu.Unlock()
	if s.exitFinal {
		return
	}
	s.exitFinal = final
	if final {
		// A second copy of the end state, in the journal, for an engine
		// that finds exit.json damaged (ReadExit).
		if b, err := json.Marshal(ex); err == nil {
			s.jmu.Lock()
			if err := s.j.AppendEnd(b); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.logf("journal end record: %v", err)
			}
			s.jmu.Unlock()
		}
	}
	s.exitDue = &ex
	if err := s.writeExitLocked(); err != nil {
		s.logf("write exit.json: %v (kept in memory until it can be written)", err)
		s.retryWrites()
	}
}

// writeExitLocked writes the due exit record, if any; one that cannot be
// written stays due (s.exitMu must be held).
func (s *sup) writeExitLocked() error {
	if s.exitDue == nil {
		return nil
	}
	if err := WriteJSON(ExitPath(s.dir), *s.exitDue); err != nil {
		if errors.Is(err, os.ErrNotExist) { // the engine removed the session
			s.exitDue = nil
			return nil
		}
		return err
	}
	s.exitDue = nil
	s.exitWritten = true
	return nil
}

// deferExit reports whether the final exit.json may wait for the
// directory check of a host: not when a provisional record is on disk,
// which the final one must replace at once.
func (s *sup) deferExit() bool {
	s.exitMu.Lock()
	defer s.exitMu.Unlock()
	return s.shared && !s.exitWritten
}

// kill starts the kill sequence once; later calls only keep the first
// cause.
func (s *sup) kill(by KilledBy, grace time.Duration) {
	s.mu.Lock()
	if s.killedBy == "" {
		select {
		case <-s.mainExited:
			// Already ended by itself: not a kill. Output held back
			// by a full disk is not waited for any more.
			s.mu.Unlock()
			s.abandonOutput("kill after the end")
			return
		default:
		}
		s.killedBy = by
		s.timedOut = by == KilledByTimeout
	}
	if s.killing {
		s.mu.Unlock()
		return
	}
	s.killing = true
	s.mu.Unlock()
	go s.treeKill(grace)
}

// treeKill sends SIGTERM to the group and every member, waits up to grace
// for them to go, then SIGKILLs whatever is left.
func (s *sup) treeKill(grace time.Duration) {
	s.mu.Lock()
	s.killing = true
	s.mu.Unlock()
	members := s.cont.members()
	n := 0
	for _, pid := range members {
		if pid != s.cmd.Process.Pid {
			n++
		}
	}
	s.mu.Lock()
	if s.killedBy != "" {
		s.killCount = n
	}
	s.mu.Unlock()
	s.killInside(grace)
	s.cont.signal(syscall.SIGTERM)
	if s.ptmx != nil {
		// A shell on a PTY also expects SIGHUP when its terminal goes.
		s.cont.signal(syscall.SIGHUP)
	}
	if !s.waitTreeGone(grace) {
		s.cont.killAll()
		s.waitTreeGone(2 * time.Second)
	}
}

// killInside runs the sandbox's in-sandbox kill (docker), if any, and
// waits for it up to grace + 10 s.
func (s *sup) killInside(grace time.Duration) {
	sb := s.spec.Sandbox
	if sb == nil || len(sb.KillArgv) == 0 {
		return
	}
	argv := append(append([]string{}, sb.KillArgv...), "--kill-session", s.spec.ID, "--grace-ms", fmt.Sprint(grace.Milliseconds()))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := cmd.Start(); err != nil {
		s.logf("in-sandbox kill: %v", err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			s.logf("in-sandbox kill: %v", err)
		}
	case <-time.After(grace + 10*time.Second):
		cmd.Process.Kill()
		s.logf("in-sandbox kill did not finish in time")
	}
}

// waitTreeGone waits until the main process was reaped and no member is
// left, or d passes; it reports whether the tree is gone.
func (s *sup) waitTreeGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		exited := false
		select {
		case <-s.mainExited:
			exited = true
		default:
		}
		if exited && len(s.cont.members()) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// subscriber receives Events; it always gets the newest cursor and, last,
// the end state.
type subscriber struct {
	w    io.WriteCloser
	wake chan struct{}
	gone chan struct{}
}

func (s *sup) addSubscriber(w io.WriteCloser) *subscriber {
	sub := &subscriber{w: w, wake: make(chan struct{}, 1), gone: make(chan struct{})}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	go s.feed(sub)
	sub.kickNow()
	return sub
}

func (sub *subscriber) kickNow() {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (s *sup) kick() {
	s.mu.Lock()
	subs := s.subs
	s.mu.Unlock()
	for _, sub := range subs {
		sub.kickNow()
	}
}

func (s *sup) feed(sub *subscriber) {
	defer close(sub.gone)
	defer s.dropSubscriber(sub)
	defer sub.w.Close()
	enc := json.NewEncoder(sub.w)
	last := int64(-1)
	for range sub.wake {
		s.mu.Lock()
		final := s.final
		s.mu.Unlock()
		cur := s.cursor.Load()
		if final != nil {
			enc.Encode(Event{Cursor: final.OutputBytes, Exit: final})
			return
		}
		if cur != last {
			if err := enc.Encode(Event{Cursor: cur}); err != nil {
				return
			}
			last = cur
		}
		// Coalesce bursts to about 100 cursor events per second, but
		// never hold back the end state.
		select {
		case <-time.After(10 * time.Millisecond):
		case <-s.finalSet:
		}
	}
}

func (s *sup) dropSubscriber(sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.subs {
		if x == sub {
			s.subs = append(s.subs[:i:i], s.subs[i+1:]...)
			return
		}
	}
}

// listen opens the session's control socket; in a host, the session is
// served on the host's socket instead.
func (s *sup) listen() error {
	if s.shared {
		return hostSessions.add(s)
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
	} else if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("socket directory %s is owned by uid %d, not %d", filepath.Dir(path), st.Uid, os.Getuid())
	} else if fi.Mode().Perm()&0o077 != 0 {
		// Only we may reach the sockets in it. (unixsock never changes
		// the umask: it is the process's, and a host starts other
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

// PeerUID is the uid of the process at the other end of c (SO_PEERCRED).
func PeerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
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
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			enc.Encode(Reply{Error: "bad request: " + err.Error()})
			continue
		}
		if req.V != ProtocolVersion {
			enc.Encode(Reply{Error: fmt.Sprintf("unsupported protocol version %d", req.V)})
			continue
		}
		if req.Op == "flush" && req.Session == "" {
			// A host writes the files its sessions owe before an engine
			// reads the home (sup.flushFiles); a single supervisor owes
			// none.
			hostSessions.flushAll()
			enc.Encode(Reply{OK: true})
			continue
		}
		s := find(req.Session)
		if s == nil {
			enc.Encode(Reply{Error: errNoSession})
			continue
		}
		if req.Op == "subscribe" {
			enc.Encode(Reply{OK: true})
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

func (s *sup) handle(req Request) Reply {
	switch req.Op {
	case "hello":
		return Reply{OK: true, PID: s.cmd.Process.Pid}
	case "status":
		return Reply{OK: true, Status: s.status()}
	case "meta":
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.meta == nil {
			return Reply{Error: "session is starting"}
		}
		return Reply{OK: true, Meta: s.meta}
	case "write":
		if err := s.write(req.Data); err != nil {
			return Reply{Error: err.Error()}
		}
		return Reply{OK: true}
	case "closeStdin":
		if err := s.closeStdin(); err != nil {
			return Reply{Error: err.Error()}
		}
		return Reply{OK: true}
	case "signal":
		s.cont.signal(syscall.Signal(req.Sig))
		return Reply{OK: true}
	case "kill":
		grace := s.grace()
		if req.GraceMs != nil {
			grace = time.Duration(*req.GraceMs) * time.Millisecond
		}
		by := KilledBy(req.By)
		if by == "" {
			by = KilledByAgent
		}
		if !by.Valid() {
			return Reply{Error: fmt.Sprintf("kill: unknown cause %q", req.By)}
		}
		s.kill(by, grace)
		return Reply{OK: true}
	case "trim":
		if req.MaxBytes <= 0 {
			return Reply{Error: "trim: maxBytes must be positive"}
		}
		s.jmu.Lock()
		j := s.j
		s.jmu.Unlock()
		if j == nil {
			return Reply{Error: "trim: no journal"}
		}
		_, after, err := j.Trim(req.MaxBytes)
		if err != nil {
			return Reply{Error: err.Error()}
		}
		s.logf("journal trimmed to %d bytes (cap %d)", after, req.MaxBytes)
		return Reply{OK: true, Bytes: after}
	case "resize":
		if s.ptmx == nil {
			return Reply{Error: "not a PTY session"}
		}
		if req.Cols < 1 || req.Rows < 1 || req.Cols > 0xffff || req.Rows > 0xffff {
			return Reply{Error: fmt.Sprintf("invalid size %dx%d", req.Cols, req.Rows)}
		}
		// The emulator first: output the program writes for the new
		// size must not be emulated at the old one.
		s.term.Resize(req.Cols, req.Rows)
		if err := pty.Setsize(s.ptmx, &pty.Winsize{Cols: uint16(req.Cols), Rows: uint16(req.Rows)}); err != nil {
			return Reply{Error: err.Error()}
		}
		return Reply{OK: true}
	case "screen":
		if s.term == nil {
			return Reply{Error: "not a PTY session"}
		}
		// The pump stores the cursor after feeding the terminal: the
		// snapshot covers at least the output up to cur.
		cur := s.cursor.Load()
		snap := s.term.Snapshot()
		return Reply{OK: true, Screen: &snap, Cursor: cur}
	}
	return Reply{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

func (s *sup) status() *Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &Status{PID: s.cmd.Process.Pid, Cursor: s.cursor.Load(), Stdin: s.stdinState, Modes: s.modes.Modes(), KilledBy: string(s.killedBy), LastOutputNs: s.lastOutput.Load()}
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
		s.ptmx.SetWriteDeadline(time.Now().Add(time.Second))
		_, err := s.ptmx.Write(r)
		s.ptmx.SetWriteDeadline(time.Time{})
		s.wmu.Unlock()
		if err != nil && !failed {
			s.logf("write terminal reply: %v", err)
			failed = true
		}
	}
}

// errStdinClosed is reported when input arrives after stdin was closed.
var errStdinClosed = errors.New("stdin is closed")

func (s *sup) write(p []byte) error {
	s.mu.Lock()
	w := s.stdin
	if s.ptmx != nil {
		w = s.ptmx
	}
	s.mu.Unlock()
	if w == nil {
		return errStdinClosed
	}
	s.wmu.Lock()
	w.SetWriteDeadline(time.Now().Add(5 * time.Second))
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
		return s.write([]byte{0x04})
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
