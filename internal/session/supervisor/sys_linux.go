package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes the supervisor the reaper of its session's
// orphans (PR_SET_CHILD_SUBREAPER), so that descendants finds a daemon
// that left the process group.
func becomeSubreaper() {
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
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

// socketPeerUID is the uid of the peer of the connected AF_UNIX socket
// fd (SO_PEERCRED).
func socketPeerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}

// sharedSocketpair makes the engine–shared supervisor link: SOCK_SEQPACKET keeps each
// message (and the descriptors sent with it) whole.
func sharedSocketpair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
}

// growPipe raises a pipe's buffer to 1 MiB (F_SETPIPE_SZ), so that a
// command writing fast blocks less often on a pump that lags.
func growPipe(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) }

// startInside makes attr start the command inside the session's v2
// cgroup (CLONE_INTO_CGROUP) when there is one; the returned func closes
// the cgroup descriptor once the command has started.
func (c *containment) startInside(attr *syscall.SysProcAttr) func() {
	fd := c.cgroupFD()
	if fd < 0 {
		return func() {}
	}
	attr.UseCgroupFD = true
	attr.CgroupFD = fd
	return func() { unix.Close(fd) }
}

// startsInside reports whether attr starts the command inside a cgroup.
func startsInside(attr *syscall.SysProcAttr) bool { return attr.UseCgroupFD }

// startOutside starts cmd again outside the cgroup after a start inside
// it failed with err, and moves the child in right after.
func (s *sup) startOutside(cmd *exec.Cmd, err error) (*exec.Cmd, error) {
	spec := s.spec
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
		s.cont.place([]int{cmd.Process.Pid}) // and its v1 limit cgroups
	}
	return cmd, err
}

// holdPTYSlave is false: Linux keeps a PTY's unread output when the last
// slave descriptor closes, so the supervisor closes its copy at start
// (a variable: the tests hold it here to exercise macOS's path).
var holdPTYSlave = false

// ptyPending is how many bytes of output wait in the PTY whose master is
// fd (TIOCINQ, FIONREAD, on the master).
func ptyPending(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCINQ) }
