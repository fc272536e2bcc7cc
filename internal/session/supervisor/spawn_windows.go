package supervisor

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/sys/windows"

	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/term/vt"
)

// errSandboxFDs refuses a sandbox that hands its command descriptors
// (the start gate on fd 3, files from fd 4): a Windows command inherits
// handles, not numbered descriptors, and no backend that needs them
// exists there.
var errSandboxFDs = errors.New("sandbox: passing descriptors to the command is not supported on Windows")

// launch starts the session's command in its Job Object, with pipes or a
// pseudoconsole, and serves it: the Windows form of spawn.go's launch,
// step for step. Not yet run on Windows.
func (s *sup) launch() (retErr error) {
	spec := s.spec
	if len(spec.Argv) == 0 {
		return errors.New("empty argv")
	}
	if sb := spec.Sandbox; sb != nil && (sb.BlockFD || len(sb.Files) > 0) {
		return errSandboxFDs
	}
	// A launch that fails leaves nothing behind.
	var opened []*os.File
	var childEnds []windows.Handle
	defer func() {
		if retErr == nil {
			return
		}
		for _, f := range opened {
			f.Close()
		}
		for _, h := range childEnds {
			windows.CloseHandle(h)
		}
		s.pty.close()
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
	// A Go panic or fatal error of ours goes to supervisor.log.
	if f, err := os.OpenFile(proto.LogPath(s.dir), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
		debug.SetCrashOutput(f, debug.CrashOptions{})
		f.Close()
	}
	j, err := journal.Create(s.dir, journal.Options{MaxBytes: spec.JournalMaxBytes, HeadBytes: spec.JournalHeadBytes, New: true})
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	s.j = j
	s.sum = sha256.New()
	s.cursor.Store(j.Cursor())

	// The job is the session's containment whatever NoCgroup says (it
	// asks for no cgroup, which Windows does not have anyway).
	s.cont = newCgroup(fmt.Sprintf("%s-%d", spec.ID, os.Getpid()))
	if s.cont.job == 0 {
		return errNoJob
	}
	var sbMeta *proto.SandboxMeta
	limMeta := s.applyLimits()
	if sb := spec.Sandbox; sb != nil {
		sbMeta = &proto.SandboxMeta{Backend: sb.Backend, Scope: sb.Scope, Layers: sb.Layers}
		if limMeta != nil {
			sbMeta.Limits = limMeta.Enforced
		}
		sbMeta.Unenforced = s.warnings
	}
	path, err := programPath(spec.Argv[0])
	if err != nil {
		return fmt.Errorf("spawn %s: %w", spec.Argv[0], unwrapPathErr(err))
	}

	var io childIO
	var readers []*os.File
	if spec.PTY {
		con, in, out, ends, err := openConsole(spec.Cols, spec.Rows)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrOpenPTY, err)
		}
		s.pty.con, s.pty.in, s.ptmx = con, in, out
		opened = append(opened, out)
		childEnds = append(childEnds, ends...)
		io.console = con
		x, y := consoleSize(spec.Cols, spec.Rows)
		s.term = vt.New(int(x), int(y))
		s.stdinState = "pty"
	} else {
		var ends [3]*os.File
		for i := 1; i <= 2; i++ {
			r, w, err := os.Pipe()
			if err != nil {
				return fmt.Errorf("pipe: %w", err)
			}
			opened = append(opened, r, w)
			readers = append(readers, r)
			ends[i] = w
		}
		if spec.Stdin == "open" {
			r, w, err := os.Pipe()
			if err != nil {
				return fmt.Errorf("pipe: %w", err)
			}
			opened = append(opened, r, w)
			ends[0], s.stdin, s.stdinState = r, w, "open"
		} else {
			null, err := os.Open(os.DevNull)
			if err != nil {
				return err
			}
			opened = append(opened, null)
			ends[0], s.stdinState = null, "closed"
		}
		io.stdin, io.stdout, io.stderr = windows.Handle(ends[0].Fd()), windows.Handle(ends[1].Fd()), windows.Handle(ends[2].Fd())
		defer func() {
			for _, f := range ends {
				f.Close() // the child has its own copies
			}
		}()
	}

	// Windows delivers a console's Ctrl+C and Ctrl+Break as
	// os.Interrupt, its close, logoff and shutdown as SIGTERM.
	term := make(chan os.Signal, 1)
	signal.Notify(term, os.Interrupt, syscall.SIGTERM)

	s.started = time.Now()
	pi, err := createProcess(path, spec.Argv, spec.Env, spec.Dir, io, s.cont.job)
	for _, h := range childEnds {
		windows.CloseHandle(h)
	}
	childEnds = nil
	if err != nil {
		signal.Stop(term)
		return fmt.Errorf("spawn %s: %w", spec.Argv[0], unwrapPathErr(err))
	}
	pid := int(pi.ProcessId)
	proc, err := os.FindProcess(pid) // while pi.Process holds the id
	windows.CloseHandle(pi.Process)
	if err != nil {
		s.cont.killAll()
		signal.Stop(term)
		return fmt.Errorf("spawn %s: %w", spec.Argv[0], err)
	}
	go func() {
		st, err := proc.Wait()
		if err == nil {
			s.mainStatus, _ = st.Sys().(syscall.WaitStatus)
		}
		close(s.mainExited)
	}()
	s.cmd = &exec.Cmd{Path: path, Args: spec.Argv, Env: spec.Env, Dir: spec.Dir, Process: proc}
	s.cont.pgid, s.cont.born = pid, true
	s.cont.interrupt = s.interrupter(pid)

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
	meta := proto.Meta{
		V: proto.ProtocolVersion, ID: spec.ID, Agent: spec.Agent, Name: spec.Name, Command: spec.Command,
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
			s.kill(proto.KilledByTimeout, s.grace())
		})
		go func() {
			<-s.done
			timeout.Stop()
		}()
	}
	s.mu.Lock() // the socket already serves op meta
	s.meta = &meta
	s.mu.Unlock()
	if err := s.writeFiles(); err != nil {
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
			s.kill(proto.KilledByShutdown, s.grace())
		case <-s.done:
		}
	}()
	return nil
}

// interrupter is the session's console interrupt (winSignalInterrupt):
// Ctrl+C typed into its pseudoconsole, which the console turns into
// CTRL_C_EVENT for every process attached to it; without one, Ctrl+Break
// to the command's console process group (Ctrl+C cannot be sent to a
// group other than the whole console).
func (s *sup) interrupter(pid int) func() {
	if s.ptmx != nil {
		return func() {
			s.wmu.Lock()
			s.pty.in.Write([]byte{0x03})
			s.wmu.Unlock()
		}
	}
	return func() {
		if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(pid)); err != nil {
			s.logf("Ctrl+Break to process group %d: %v", pid, err)
		}
	}
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
