//go:build unix

package supervisor

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// The Unix side of what the supervisor does differently on Windows
// (sys_windows.go): how the engine's pipes reach a supervisor, what a
// process's end and a socket's owner look like, and the PTY.

// passPipes gives a supervisor the spec pipe as fd 3 and the ready pipe
// as fd 4, in a session of its own.
func passPipes(cmd *exec.Cmd, specR, readyW *os.File) {
	cmd.ExtraFiles = []*os.File{specR, readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// sessionPipes are the engine's pipes of a starting supervisor: fd 3 (the
// spec, or a shared supervisor's socket) and fd 4 (the ready report; nil for a shared supervisor,
// which has no fd 4: a File for it would close whatever later gets that
// number when it is collected). They come without close-on-exec; the
// command and its children must not inherit them (a daemon holding fd 4
// would keep the engine's event pipe open after the supervisor died).
func sessionPipes(host bool) (specIn, readyOut *os.File) {
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	if host {
		return os.NewFile(3, "host"), nil
	}
	return os.NewFile(3, "spec"), os.NewFile(4, "ready")
}

// pidGone reports whether no live process has the id pid.
func pidGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH || isZombie(pid)
}

// isRefused reports a connection refused: nobody listens on the socket.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// fileUID is the owner of the file fi describes.
func fileUID(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// signalName is the name of sig ("SIGTERM"), or "" when it has none.
func signalName(sig syscall.Signal) string { return unix.SignalName(sig) }

// ptyEOF is what closing a PTY session's stdin types: Ctrl+D, the end of
// input to a program reading the terminal.
const ptyEOF = "\x04"

// ptyState is nothing on Unix: the PTY master is both ends.
type ptyState struct{}

// setPTYSize sets the terminal's size.
func (s *sup) setPTYSize(cols, rows int) error {
	return pty.Setsize(s.ptmx, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
}

// ptyInput is where the command's terminal input goes: the master.
func (s *sup) ptyInput() *os.File { return s.ptmx }

// ptyTreeGone does nothing: the master reads EIO by itself once the
// session's processes have all closed the terminal.
func (s *sup) ptyTreeGone() {}
