//go:build unix

package supervisor

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/term/vt"
)

// launch starts the session's command under the supervisor: the steps
// below, in order. A launch that fails leaves nothing behind (no
// descriptor, cgroup or open journal): in a shared supervisor, which lives on, leaks
// would add up.
func (s *sup) launch() (retErr error) {
	if len(s.spec.Argv) == 0 {
		return errors.New("empty argv")
	}
	var lf launchFiles
	defer func() {
		lf.closeBlock()
		if retErr != nil {
			lf.closeOpened()
			s.undoLaunch()
		}
	}()
	if err := s.openSessionDir(); err != nil {
		return err
	}
	if err := s.openJournal(); err != nil {
		return err
	}
	if err := s.openContainment(); err != nil {
		return err
	}
	limMeta := s.applyLimits()
	cmd := s.command()
	if err := s.wireStdio(cmd, &lf); err != nil {
		return err
	}
	if err := s.wireSandboxFiles(cmd, &lf); err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := s.spawn(cmd, &lf); err != nil {
		signal.Stop(term)
		return err
	}
	s.releaseBlocked(&lf)
	s.startPumps(lf.readers)
	s.serveControl()
	meta := s.metaRecord(limMeta)
	s.startTimeout(&meta)
	s.publishMeta(&meta)
	s.writeFilesOrSchedule()
	go s.killOnSignal(term)
	return nil
}

// launchFiles are the descriptors a launch opens before the spawn.
type launchFiles struct {
	opened    []*os.File // everything opened: closed if the launch fails
	childEnds []*os.File // the child's ends: closed once it has them
	readers   []*os.File // stdout, stderr (nil with a PTY)
	blockW    *os.File   // the sandbox's block pipe, written to let the child go (nil: none)
}

// closeOpened closes what a failed launch opened (a second Close of an
// *os.File is harmless).
func (lf *launchFiles) closeOpened() {
	for _, f := range lf.opened {
		f.Close()
	}
}

// closeBlock closes the block pipe if it is still open: the child, if
// any, then reads EOF and gives up.
func (lf *launchFiles) closeBlock() {
	if lf.blockW != nil {
		lf.blockW.Close()
		lf.blockW = nil
	}
}

// undoLaunch removes what a failed launch set up beyond descriptors: the
// session cgroups and the journal.
func (s *sup) undoLaunch() {
	if s.cont != nil {
		s.cont.remove()
	}
	if s.j != nil {
		s.j.Close()
	}
}

// openSessionDir makes the session directory and, for a supervisor of
// its own, sends its stderr (a Go panic, a runtime fatal error) to
// supervisor.log instead of /dev/null. (A shared supervisor's goes to its own log.)
func (s *sup) openSessionDir() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("session dir: %w", err)
	}
	if !s.shared {
		if f, err := os.OpenFile(proto.LogPath(s.dir), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
			unix.Dup2(int(f.Fd()), 2)
			f.Close()
		}
	}
	return nil
}

// openJournal creates the session's journal. The session is new (the
// engine reserves its directory exclusively), and the directory may be
// one the engine reused, still locked by the journal of an ended session
// whose supervisor has not closed it yet: New skips the recovery and the
// lock.
func (s *sup) openJournal() error {
	j, err := journal.Create(s.dir, journal.Options{MaxBytes: s.spec.JournalMaxBytes, HeadBytes: s.spec.JournalHeadBytes, New: true})
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	s.j = j
	s.sum = sha256.New()
	s.cursor.Store(j.Cursor())
	return nil
}

// openContainment makes the session's cgroups (none with NoCgroup). A
// shared supervisor cannot contain a session without one: ErrNeedsCgroup.
func (s *sup) openContainment() error {
	s.cont = &containment{}
	if !s.spec.NoCgroup {
		// Session ids are unique per home only: qualify the cgroup name
		// with the supervisor's pid, which is unique while it lives.
		s.cont = newCgroup(fmt.Sprintf("%s-%d", s.spec.ID, os.Getpid()))
	}
	if s.shared && s.cont.cgroupDir() == "" {
		return ErrNeedsCgroup
	}
	return nil
}

// command is the exec.Cmd of the spec's argv, environment and directory.
func (s *sup) command() *exec.Cmd {
	spec := s.spec
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	if cmd.Err != nil {
		// exec.Command looked the program up in our own PATH; let the
		// kernel report errors for absolute paths and keep the text.
		cmd.Err = nil
		cmd.Path = spec.Argv[0]
	}
	return cmd
}

// wireStdio gives cmd its terminal (a PTY of the spec's size, its own
// session) or its pipes (stdout, stderr, and stdin open or /dev/null, its
// own process group).
func (s *sup) wireStdio(cmd *exec.Cmd, lf *launchFiles) error {
	if s.spec.PTY {
		return s.wirePTY(cmd, lf)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for i := 0; i < 2; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("pipe: %w", err)
		}
		lf.opened = append(lf.opened, r, w)
		// Not r.Fd(): that would make the pipe blocking, so that a
		// pump would hold an OS thread in read(2) and Close could
		// not interrupt it.
		if rc, err := r.SyscallConn(); err == nil {
			rc.Control(growPipe)
		}
		lf.readers = append(lf.readers, r)
		lf.childEnds = append(lf.childEnds, w)
	}
	cmd.Stdout, cmd.Stderr = lf.childEnds[0], lf.childEnds[1]
	if s.spec.Stdin == "open" {
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("pipe: %w", err)
		}
		lf.opened = append(lf.opened, r, w)
		cmd.Stdin = r
		lf.childEnds = append(lf.childEnds, r)
		s.stdin = w
		s.stdinState = "open"
		return nil
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	lf.opened = append(lf.opened, null)
	cmd.Stdin = null
	lf.childEnds = append(lf.childEnds, null)
	s.stdinState = "closed"
	return nil
}

// wirePTY is wireStdio with a PTY (120x30 unless the spec says).
func (s *sup) wirePTY(cmd *exec.Cmd, lf *launchFiles) error {
	spec := s.spec
	ptmx, tty, err := pty.Open()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOpenPTY, err)
	}
	lf.opened = append(lf.opened, ptmx, tty)
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
	lf.childEnds = append(lf.childEnds, tty)
	if holdPTYSlave {
		s.slave = tty
	}
	return nil
}

// wireSandboxFiles passes a sandboxed child its block pipe (fd 3: it
// waits there until its tree is in the limit cgroups) and the sandbox's
// files (from fd 4 on, read-only), when the spec asks for them.
func (s *sup) wireSandboxFiles(cmd *exec.Cmd, lf *launchFiles) error {
	sb := s.spec.Sandbox
	if sb == nil || !sb.BlockFD {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	lf.opened = append(lf.opened, r)
	cmd.ExtraFiles = []*os.File{r}
	lf.childEnds = append(lf.childEnds, r)
	lf.blockW = w
	for _, p := range sb.Files {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		lf.opened = append(lf.opened, f)
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		lf.childEnds = append(lf.childEnds, f)
	}
	return nil
}

// spawn starts cmd in the session's cgroups (born inside the v2 one where
// the kernel can, else moved right after) with the reaper watching it,
// then closes the child's ends of its descriptors.
func (s *sup) spawn(cmd *exec.Cmd, lf *launchFiles) error {
	defer s.cont.startInside(cmd.SysProcAttr)()
	// The reaper must know the main process before it can be reaped.
	reap.start()
	reap.startMu.RLock()
	s.started = time.Now()
	err := s.cont.start(cmd) // born in the session's v1 cgroups too
	if err != nil && startsInside(cmd.SysProcAttr) && !isSpawnError(err) {
		cmd, err = s.startOutside(cmd, err)
	}
	if err == nil {
		reap.watch(cmd.Process.Pid, func(ws syscall.WaitStatus) {
			s.mainStatus = ws
			close(s.mainExited)
		})
	}
	reap.startMu.RUnlock()
	for _, f := range lf.childEnds {
		if f == s.slave && err == nil {
			continue // closed by releaseSlave
		}
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("spawn %s: %w", s.spec.Argv[0], unwrapPathErr(err))
	}
	s.cmd = cmd
	if s.slave != nil {
		// Counted with the pumps: the end waits for the output, which
		// cannot end while the slave is held.
		s.outputs.Add(1)
		go func() {
			defer s.outputs.Done()
			<-s.mainExited
			s.releaseSlave()
		}()
	}
	s.cont.pgid = cmd.Process.Pid
	if !s.cont.born {
		s.cont.adopt(cmd.Process.Pid)
	}
	return nil
}

// releaseBlocked lets a child that waits on its block pipe go, once its
// whole tree (bwrap may have forked already) is in the limit cgroups. A
// fork racing with a move can leave the child behind: it lists again
// until a listing holds only processes moved before it. A tree born in
// them (containment.start) is there already.
func (s *sup) releaseBlocked(lf *launchFiles) {
	if lf.blockW == nil {
		return
	}
	pid := s.cmd.Process.Pid
	moved := map[int]bool{}
	for i := 0; i < 100 && !s.cont.born; i++ {
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
	if _, err := lf.blockW.Write([]byte{1}); err != nil {
		s.logf("release the sandbox's block pipe: %v", err)
	}
	lf.closeBlock()
}

// startPumps starts the goroutines that copy the command's output into
// the journal: one for a PTY (and the answerer of its terminal queries),
// one per pipe otherwise.
func (s *sup) startPumps(readers []*os.File) {
	if s.ptmx != nil {
		s.outputs.Add(1)
		go s.pump(s.ptmx, journal.Stdout)
		s.answered = make(chan struct{})
		go s.answer()
		return
	}
	s.outputs.Add(2)
	s.readers = readers
	go s.pump(readers[0], journal.Stdout)
	go s.pump(readers[1], journal.Stderr)
}

// serveControl opens the control socket (a shared supervisor's is open already); a
// session whose socket cannot be opened still runs, and reports the
// spec's socket.
func (s *sup) serveControl() {
	if err := s.listen(); err != nil {
		s.logf("control socket: %v", err)
	}
	if s.socket == "" {
		s.socket = s.spec.Socket
	}
}

// metaRecord is the session's meta.json, from the spec and the started
// command.
func (s *sup) metaRecord(limMeta *proto.LimitsMeta) proto.Meta {
	spec := s.spec
	pid := s.cmd.Process.Pid
	var sbMeta *proto.SandboxMeta
	if sb := spec.Sandbox; sb != nil {
		sbMeta = &proto.SandboxMeta{Backend: sb.Backend, Scope: sb.Scope, Layers: sb.Layers, Unenforced: s.warnings}
		if limMeta != nil {
			sbMeta.Limits = limMeta.Enforced
		}
	}
	return proto.Meta{
		V: proto.ProtocolVersion, ID: spec.ID, Agent: spec.Agent, Name: spec.Name, Command: spec.Command,
		Argv: spec.Argv, Cwd: spec.Dir, Host: spec.Host, HostReason: spec.HostReason, PTY: spec.PTY,
		Cols: spec.Cols, Rows: spec.Rows, Stdin: s.stdinState, State: "running",
		StartedAt: s.started.UnixMilli(), PID: pid, PGID: pid, PIDStartTime: StartTime(pid),
		Cgroup: s.cont.describe(), SupervisorPID: os.Getpid(), SupervisorStartTime: ownStartTime(),
		Socket: s.socket, KillGraceMs: spec.KillGraceMs, IdempotencyKey: spec.IdempotencyKey,
		Fingerprint: spec.Fingerprint, EnvKeys: spec.EnvKeys, Sandbox: sbMeta, Limits: limMeta,
	}
}

// startTimeout arms the spec's timeout (none for 0) and records when it
// fires in meta.
func (s *sup) startTimeout(meta *proto.Meta) {
	if s.spec.TimeoutMs <= 0 {
		return
	}
	meta.TimeoutAt = s.started.UnixMilli() + s.spec.TimeoutMs
	timeout := time.AfterFunc(time.Duration(s.spec.TimeoutMs)*time.Millisecond, func() {
		s.kill(proto.KilledByTimeout, s.grace())
	})
	// In a shared supervisor an unfired timer would keep the ended session (buffers
	// and all) in memory until it fired.
	go func() {
		<-s.done
		timeout.Stop()
	}()
}

// publishMeta makes meta the record op meta serves (the socket already
// answers).
func (s *sup) publishMeta(meta *proto.Meta) {
	s.mu.Lock()
	s.meta = meta
	s.mu.Unlock()
}

// writeFilesOrSchedule writes meta.json and state.json now, or, in a
// shared supervisor, a moment later (filesDelay) or at once when the shared supervisor retires. A
// write that fails is retried (retryWrites) while the files are served
// from memory.
func (s *sup) writeFilesOrSchedule() {
	if s.shared {
		s.fileMu.Lock()
		s.filesDue = true
		s.fileMu.Unlock()
		select {
		case <-sharedRetired:
			s.flushFiles()
		default:
			time.AfterFunc(filesDelay, s.flushFiles)
		}
		return
	}
	if err := s.writeFiles(); err != nil {
		s.logf("%v", err)
		s.fileMu.Lock()
		s.filesOwed = true
		s.fileMu.Unlock()
		s.retryWrites()
	}
}

// killOnSignal runs the kill sequence (killedBy shutdown) when the
// supervisor gets SIGTERM, SIGINT or SIGHUP before the session is done.
func (s *sup) killOnSignal(term chan os.Signal) {
	defer signal.Stop(term)
	select {
	case <-term:
		s.kill(proto.KilledByShutdown, s.grace())
	case <-s.done:
	}
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
