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

	"github.com/conchsh/conch/internal/journal"
	"github.com/conchsh/conch/internal/vt"
)

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
	limMeta := s.applyLimits()
	if sb := spec.Sandbox; sb != nil {
		sbMeta = &SandboxMeta{Backend: sb.Backend, Scope: sb.Scope, Layers: sb.Layers}
		if limMeta != nil {
			sbMeta.Limits = limMeta.Enforced
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
		if holdPTYSlave {
			s.slave = tty
		}
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
				rc.Control(growPipe)
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
	defer s.cont.startInside(cmd.SysProcAttr)()

	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	// The reaper must know the main process before it can be reaped.
	reap.start()
	reap.startMu.RLock()
	s.started = time.Now()
	err = s.cont.start(cmd) // born in the session's v1 cgroups too
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
	for _, f := range childEnds {
		if f == s.slave && err == nil {
			continue // closed by releaseSlave
		}
		f.Close()
	}
	if err != nil {
		signal.Stop(term)
		return fmt.Errorf("spawn %s: %w", spec.Argv[0], unwrapPathErr(err))
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
	pid := cmd.Process.Pid
	s.cont.pgid = pid
	if !s.cont.born {
		s.cont.adopt(pid)
	}
	if blockW != nil {
		// The child waits on fd 3: put its whole tree (bwrap may have
		// forked already) into the limit cgroups, then let it go.
		// A fork racing with a move can leave the child behind: list
		// again until a listing holds only processes moved before it.
		// A tree born in them (containment.start) is there already.
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
		Fingerprint: spec.Fingerprint, EnvKeys: spec.EnvKeys, Sandbox: sbMeta, Limits: limMeta,
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
