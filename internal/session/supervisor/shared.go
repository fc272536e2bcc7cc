//go:build unix

package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"golang.org/x/sys/unix"
)

// A shared supervisor is one supervisor process serving many sessions. Starting a Go
// process costs milliseconds of CPU (runtime start, package init, page
// faults, exit); a shared supervisor pays that once instead of once per exec. Each
// session still has everything a single supervisor gives it: its own
// journal, meta.json, exit.json, control socket and cgroup, so recovery,
// process calls and cleanup do not know the difference.
//
// The engine talks to a shared supervisor over a SOCK_SEQPACKET socket (fd 3 of the
// shared supervisor). Each message carries two descriptors and no payload of note: the
// read end of a spec pipe and the write end of a ready pipe. From there on
// the session's protocol is exactly the single supervisor's on fd 3 and 4.
// The shared supervisor exits once the engine closes the socket (it retires the shared supervisor,
// or it exited) and the shared supervisor's last session ended.
//
// Sessions in a shared supervisor share one fate: a shared supervisor that dies takes the
// supervision of all its sessions with it (the engine retires shared supervisors after
// sharedSessions sessions to bound that). And they must have a cgroup: the
// shared supervisor is the subreaper of every session, so without one a daemonised
// grandchild could not be told apart.

func sharedMain(home string, sock *os.File) int {
	if sock == nil {
		fmt.Fprintln(os.Stderr, "conch supervise --host: fd 3 must be the engine's socket")
		return 2
	}
	// Our own stderr (a Go panic, a runtime fatal error) goes to a log
	// of the shared supervisor; an empty one is removed on a clean exit.
	logPath := filepath.Join(home, "run", fmt.Sprintf("supervisor-host-%d.log", os.Getpid()))
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err == nil {
		if f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
			unix.Dup2(int(f.Fd()), 2)
			f.Close()
		}
	}
	// The engine starts supervisors with GOGC=50 to keep each small; a
	// shared supervisor's heap is shared by its sessions, and collecting it twice as
	// often cost more than the memory it saved.
	debug.SetGCPercent(100)
	fc, err := net.FileConn(sock)
	sock.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conch supervise --host:", err)
		return 2
	}
	conn, ok := fc.(*net.UnixConn)
	if !ok {
		fmt.Fprintln(os.Stderr, "conch supervise --host: fd 3 is not a unix socket")
		return 2
	}
	// SIGTERM, SIGINT and SIGHUP end every session with "shutdown" (each
	// session listens for them); the shared supervisor takes no more sessions and goes
	// once they have ended.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		<-stop
		conn.Close()
	}()
	var sessions sync.WaitGroup
	buf := make([]byte, 1+maxInlineSpec)
	oob := make([]byte, unix.CmsgSpace(2*4))
	for {
		// net's ReadMsgUnix asks for MSG_CMSG_CLOEXEC: a command another
		// session forks meanwhile cannot inherit these descriptors.
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil {
			break
		}
		if oobn == 0 && n > 1 && buf[0] == msgRelease {
			if s := sharedSessions.find(string(buf[1:n])); s != nil {
				s.release()
			}
			continue
		}
		fds, err := parseRights(oob[:oobn])
		if err == nil && len(fds) == 1 && n > 1 && buf[0] == msgSpec {
			spec := bytes.Clone(buf[1:n])
			readyOut := os.NewFile(uintptr(fds[0]), "ready")
			sessions.Add(1)
			go func() {
				defer sessions.Done()
				runSession(home, "", nil, spec, readyOut, true)
			}()
			continue
		}
		if err != nil || len(fds) != 2 {
			for _, fd := range fds {
				unix.Close(fd)
			}
			fmt.Fprintf(os.Stderr, "%s supervisor-host[%d] bad message from the engine: %v (%d descriptors)\n", time.Now().UTC().Format(time.RFC3339Nano), os.Getpid(), err, len(fds))
			continue
		}
		specIn := os.NewFile(uintptr(fds[0]), "spec")
		readyOut := os.NewFile(uintptr(fds[1]), "ready")
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			runSession(home, "", specIn, nil, readyOut, true)
		}()
	}
	conn.Close()
	close(sharedRetired)
	// Whatever the engine did not release is written now, for the next
	// engine to find.
	sharedSessions.flushAll()
	sessions.Wait()
	sharedSessions.close()
	if fi, err := os.Stat(logPath); err == nil && fi.Size() == 0 {
		os.Remove(logPath)
	}
	return 0
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		f, err := unix.ParseUnixRights(&m)
		if err != nil {
			return fds, err
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

// Shared is an engine's handle on a shared supervisor.
type Shared struct {
	cmd  *exec.Cmd
	conn *net.UnixConn
	// exited is closed when the shared supervisor process has been reaped.
	exited chan struct{}

	mu      sync.Mutex
	closed  bool
	started int // sessions sent to this shared supervisor

	up atomic.Bool // it has reported a start
}

// StartShared starts `argv... --home home --host` in its own session, with
// stdio on /dev/null and env as its environment. The process is reaped in
// the background.
func StartShared(argv []string, home string, env []string) (*Shared, error) {
	fds, err := sharedSocketpair()
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "host")
	theirs := os.NewFile(uintptr(fds[1]), "host")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, argv[1:]...), "--home", home, "--host")
	cmd := exec.Command(argv[0], args...)
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fc.Close()
		return nil, fmt.Errorf("start shared supervisor: %w", err)
	}
	h := &Shared{cmd: cmd, conn: fc.(*net.UnixConn), exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(h.exited)
	}()
	return h, nil
}

// PID is the shared supervisor's process id.
func (h *Shared) PID() int { return h.cmd.Process.Pid }

// Up reports whether the shared supervisor has reported a start: its process is
// running and answers (Pool.StartWithin gives it less time than one that
// is still starting).
func (h *Shared) Up() bool { return h.up.Load() }

// Started reports how many sessions were sent to the shared supervisor.
func (h *Shared) Started() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started
}

// Close retires the shared supervisor: it takes no more sessions and exits once those
// it runs have ended.
func (h *Shared) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		h.conn.Close()
	}
}

// Commit hands spec to the shared supervisor and waits up to readyTimeout for its
// report. Unlike a spare, a shared supervisor that does not report in time is not
// killed (it has other sessions); it kills the command itself once it
// finds nobody took its report.
func (h *Shared) Commit(spec proto.Spec, readyTimeout time.Duration) (*proto.Handle, error) {
	// A shared supervisor that reads the spec after the engine gave up must not start
	// it: the deadline is the ready timeout less a margin for the start
	// itself and the report.
	spec.StartBy = time.Now().Add(readyTimeout - min(2*time.Second, readyTimeout/4)).UnixMilli()
	b, err := encodeSpec(spec)
	if err != nil {
		return nil, err
	}
	// The spec travels in the message when it fits, else on a pipe of
	// its own.
	var specR, specW *os.File
	if len(b) > maxInlineSpec {
		if specR, specW, err = os.Pipe(); err != nil {
			return nil, err
		}
	}
	closeSpec := func() {
		if specR != nil {
			specR.Close()
			specW.Close()
		}
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		closeSpec()
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		closeSpec()
		readyR.Close()
		readyW.Close()
		return nil, ErrSharedGone
	}
	h.started++
	// Not Fd(): that would make the pipes blocking, for the shared supervisor too
	// (the flag belongs to the open file, which the shared supervisor shares).
	if specR == nil {
		err = withFD(readyW, func(fd int) error {
			_, _, err := h.conn.WriteMsgUnix(append([]byte{msgSpec}, b...), unix.UnixRights(fd), nil)
			return err
		})
	} else {
		err = withFDs(specR, readyW, func(a, b int) error {
			_, _, err := h.conn.WriteMsgUnix([]byte{msgSpec}, unix.UnixRights(a, b), nil)
			return err
		})
		specR.Close()
	}
	h.mu.Unlock()
	readyW.Close()
	if err != nil {
		if specW != nil {
			specW.Close()
		}
		readyR.Close()
		return nil, fmt.Errorf("%w: %v", ErrSharedGone, err)
	}
	var wrote <-chan error
	if specW != nil {
		wrote = writeSpec(specW, b)
	} else {
		sent := make(chan error, 1)
		sent <- nil
		wrote = sent
	}
	kill := func() {} // the shared supervisor kills the command itself
	hd, err := commit(readyR, wrote, readyTimeout, kill)
	if err != nil {
		if errors.Is(err, ErrNeedsCgroup) {
			return nil, ErrNeedsCgroup
		}
		if errors.Is(err, syscall.EMFILE) {
			// The shared supervisor is out of descriptors (each session holds about
			// seven): the session did not start; a fresh shared supervisor may take
			// it (Pool.Start decides).
			return nil, fmt.Errorf("%w: %w", ErrResourceExhausted, err)
		}
		if errors.Is(err, ErrNoReport) || errors.Is(err, ErrGone) || errors.Is(err, ErrReportTimeout) {
			// A live shared supervisor always reports, success or not: one that did
			// not within the timeout is stopped (SIGSTOP), starved or
			// dead. It will not start the command later (StartBy).
			return nil, fmt.Errorf("%w: the shared supervisor (pid %d) gave no start report within %v (stopped, starved or dead), and the command was not started: %w", ErrSharedDied, h.PID(), readyTimeout, err)
		}
		return nil, err
	}
	h.up.Store(true)
	hd.SupervisorPID = h.cmd.Process.Pid
	id := spec.ID
	hd.Release = func() { h.release(id) }
	return hd, nil
}

// Messages on a shared supervisor's socket: a spec, followed by its JSON and carrying
// the ready pipe, or carrying the spec's pipe and the ready pipe when it
// is larger than maxInlineSpec; or the release of a session (its id
// follows).
const (
	msgSpec    = 's'
	msgRelease = 'r'
)

// maxInlineSpec is the largest spec sent in a shared supervisor's message (well under
// the socket's buffer, which bounds a SOCK_SEQPACKET message).
const maxInlineSpec = 64 << 10

// release tells the shared supervisor the engine is done with session id: it writes
// no more files for it (the engine is removing its directory).
func (h *Shared) release(id string) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return
	}
	// Not under h.mu: a shared supervisor slow to read must not hold up commits. A
	// shared supervisor that is gone, or retired meanwhile (its socket closed), has
	// nothing to write either.
	h.conn.WriteMsgUnix(append([]byte{msgRelease}, id...), nil, nil)
}

// Exited is closed once the shared supervisor process has exited.
func (h *Shared) Exited() <-chan struct{} { return h.exited }

// reap is the process's one reaper: the main process of each session, and
// whatever was reparented to the supervisor as subreaper. Only main
// processes' statuses matter; they are handed to whoever watches them.
var reap = &reaper{watching: map[int]func(syscall.WaitStatus){}}

type reaper struct {
	once sync.Once
	// startMu is read-held around starting a main process and watching
	// it, and write-held while reaping: a child cannot be reaped before
	// its watcher is known.
	startMu  sync.RWMutex
	mu       sync.Mutex // guards watching
	watching map[int]func(syscall.WaitStatus)
}

func (r *reaper) start() {
	r.once.Do(func() {
		chld := make(chan os.Signal, 1)
		signal.Notify(chld, syscall.SIGCHLD)
		go r.loop(chld)
	})
}

// watch has fn called with pid's status once it is reaped. Call it with
// startMu read-held, right after the start.
func (r *reaper) watch(pid int, fn func(syscall.WaitStatus)) {
	r.mu.Lock()
	r.watching[pid] = fn
	r.mu.Unlock()
}

func (r *reaper) loop(chld chan os.Signal) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		r.startMu.Lock()
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if pid <= 0 || err != nil {
				break
			}
			r.mu.Lock()
			fn := r.watching[pid]
			delete(r.watching, pid)
			r.mu.Unlock()
			if fn != nil {
				fn(ws)
			}
		}
		r.startMu.Unlock()
		select {
		case <-chld:
		case <-tick.C:
		}
	}
}

// withFD calls fn with the descriptor of f, keeping it open (and
// non-blocking) meanwhile.
func withFD(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// withFDs calls fn with the descriptors of a and b, keeping them open (and
// non-blocking) meanwhile.
func withFDs(a, b *os.File, fn func(a, b int) error) error {
	return withFD(a, func(fa int) error {
		return withFD(b, func(fb int) error { return fn(fa, fb) })
	})
}
