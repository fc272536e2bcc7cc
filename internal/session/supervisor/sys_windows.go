package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"golang.org/x/sys/windows"
)

// The Windows side of what the supervisor does differently from Unix
// (sys_unix.go). Not yet run on Windows.

// passPipes gives a supervisor the engine's pipes as its standard input
// (the spec) and output (the ready report): os/exec cannot pass other
// descriptors on Windows, and a handle the child inherits is the Windows
// way. CREATE_NEW_PROCESS_GROUP keeps a Ctrl+C typed at conch's console
// from reaching the supervisor and its sessions (the Unix supervisor's
// own session); CREATE_NO_WINDOW gives it a console of its own, hidden,
// which its commands without a pseudoconsole share, so that it can send
// them Ctrl+Break.
func passPipes(cmd *exec.Cmd, specR, readyW *os.File) {
	cmd.Stdin, cmd.Stdout = specR, readyW
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_NO_WINDOW}
}

// sessionPipes are the engine's pipes (passPipes): standard input and
// output, which nothing else in the supervisor may use from then on.
// A command never inherits them: every handle it gets is listed
// (createProcess).
func sessionPipes(host bool) (specIn, readyOut *os.File) {
	specIn, readyOut = os.Stdin, os.Stdout
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		os.Stdin, os.Stdout = null, null
	}
	return specIn, readyOut
}

// becomeSubreaper does nothing: the session's Job Object holds its
// processes whoever their parent is.
func becomeSubreaper() {}

// closeOnExecFrom does nothing: a Windows process inherits only the
// handles its creator lists (createProcess, and os/exec for the
// in-sandbox kill, both pass PROC_THREAD_ATTRIBUTE_HANDLE_LIST).
func closeOnExecFrom(lo int) {}

// pidGone reports whether no running process has the id pid.
func pidGone(pid int) bool { return !Alive(pid, 0) }

// isRefused reports a connection refused: nobody listens on the socket.
func isRefused(err error) bool {
	return errors.Is(err, windows.WSAECONNREFUSED) || errors.Is(err, syscall.ECONNREFUSED)
}

// fileUID is not known: Windows files have an owner SID, which unixsock
// checks (and the access list) before a socket is bound.
func fileUID(fi fs.FileInfo) (int, bool) { return 0, false }

// signalName is "": a Windows process never ends by a signal
// (syscall.WaitStatus.Signaled is always false there).
func signalName(sig syscall.Signal) string { return "" }

// sioAFUnixGetPeerPID is SIO_AF_UNIX_GETPEERPID (afunix.h),
// _WSAIOR(IOC_VENDOR, 256): the process id at the other end of an
// AF_UNIX socket.
const sioAFUnixGetPeerPID = 0x58000100

// socketPeerUID checks the peer of the connected AF_UNIX socket fd:
// Windows has no uids (os.Getuid is -1), so the peer's process is found
// (SIO_AF_UNIX_GETPEERPID) and the user SID of its token compared with
// this process's; a peer of the same user reports os.Getuid(), any other
// an error.
func socketPeerUID(fd int) (int, error) {
	var pid uint32
	var n uint32
	if err := windows.WSAIoctl(windows.Handle(fd), sioAFUnixGetPeerPID, nil, 0, (*byte)(unsafe.Pointer(&pid)), uint32(unsafe.Sizeof(pid)), &n, nil, 0); err != nil {
		return -1, fmt.Errorf("peer pid: %w", err)
	}
	peer, err := processUser(pid)
	if err != nil {
		return -1, fmt.Errorf("peer %d: %w", pid, err)
	}
	me, err := ownUser()
	if err != nil {
		return -1, err
	}
	if !peer.Equals(me) {
		return -1, fmt.Errorf("peer %d runs as %s, not as %s", pid, peer, me)
	}
	return os.Getuid(), nil
}

// processUser is the user SID of process pid's token.
func processUser(pid uint32) (*windows.SID, error) {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(h)
	var tok windows.Token
	if err := windows.OpenProcessToken(h, windows.TOKEN_QUERY, &tok); err != nil {
		return nil, err
	}
	defer tok.Close()
	u, err := tok.GetTokenUser()
	if err != nil {
		return nil, err
	}
	return u.User.Sid.Copy()
}

var ownUser = sync.OnceValues(func() (*windows.SID, error) { return processUser(windows.GetCurrentProcessId()) })

// sharedMain refuses: a shared supervisor tells its sessions' processes
// apart by their cgroups, and Windows has none (CgroupAvailable is
// false, so Pool never starts one: each session has its own supervisor
// and Job Object).
func sharedMain(home string, sock *os.File) int {
	fmt.Fprintln(os.Stderr, "conch supervise --host: shared supervisors need cgroups; on Windows each session has a supervisor of its own")
	return 2
}

// Shared is a supervisor of many sessions, which Windows does not have
// (sharedMain): StartShared always refuses with ErrNeedsCgroup.
type Shared struct {
	exited chan struct{}
}

// StartShared refuses: see Shared.
func StartShared(argv []string, home string, env []string) (*Shared, error) {
	return nil, fmt.Errorf("shared supervisors on Windows: %w", ErrNeedsCgroup)
}

// PID is 0: no shared supervisor process exists.
func (h *Shared) PID() int { return 0 }

// Started is 0: a shared supervisor that cannot start has started no session.
func (h *Shared) Started() int { return 0 }

// Up is false: no shared supervisor process runs.
func (h *Shared) Up() bool { return false }

// Close does nothing.
func (h *Shared) Close() {}

// Commit refuses, like StartShared.
func (h *Shared) Commit(spec proto.Spec, readyTimeout time.Duration) (*proto.Handle, error) {
	return nil, fmt.Errorf("shared supervisors on Windows: %w", ErrNeedsCgroup)
}

// Exited is closed: there is no shared supervisor process to wait for.
func (h *Shared) Exited() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
