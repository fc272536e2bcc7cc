package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper does nothing: macOS has no child subreaper. The
// supervisor is still the parent of the command and reaps it; orphans go
// to launchd, and the tracker keeps them as members (see tracker).
func becomeSubreaper() {}

// closeOnExecFrom marks every descriptor from lo up close-on-exec,
// walking /dev/fd (macOS has no close_range). It runs at supervisor
// start, before any goroutine of ours forks. Not yet run on macOS.
func closeOnExecFrom(lo int) {
	ents, _ := os.ReadDir("/dev/fd")
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= lo {
			syscall.CloseOnExec(fd)
		}
	}
}

// socketPeerUID is the uid of the peer of the connected AF_UNIX socket
// fd (LOCAL_PEERCRED). Not yet run on macOS.
func socketPeerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}

// sharedSocketpair refuses: a shared supervisor tells its sessions'
// processes apart by their cgroups, which macOS lacks, so on macOS every
// session has a supervisor of its own (DefaultShared is false there, and
// Pool never starts a shared supervisor). The link would also need another framing:
// macOS has no SOCK_SEQPACKET for AF_UNIX.
func sharedSocketpair() ([2]int, error) {
	return [2]int{-1, -1}, fmt.Errorf("shared supervisors on macOS: %w", ErrNeedsCgroup)
}

// growPipe does nothing: macOS has no F_SETPIPE_SZ (its pipes grow to
// 64 KiB by themselves).
func growPipe(fd uintptr) {}

// startInside does nothing: there is no cgroup to start the command in.
func (c *containment) startInside(attr *syscall.SysProcAttr) func() { return func() {} }

// startsInside is false: commands never start inside a cgroup on macOS.
func startsInside(attr *syscall.SysProcAttr) bool { return false }

// startOutside is never reached on macOS (startsInside is false): it
// returns the failed start as it is.
func (s *sup) startOutside(cmd *exec.Cmd, err error) (*exec.Cmd, error) { return cmd, err }

// holdPTYSlave is true: macOS discards a PTY's unread output when the
// last slave descriptor closes (and, on some releases, when the session
// leader exits), so a command that prints and exits at once would lose
// its last output to a reader that lags. The supervisor keeps its copy
// of the slave until the command has exited and its output has been
// read (releaseSlave). Not yet run on macOS.
const holdPTYSlave = true

// ptyPending is how many bytes of output wait in the PTY whose master is
// fd: the tty's output queue, which the master reads (TIOCOUTQ). Not yet
// run on macOS.
func ptyPending(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCOUTQ) }
