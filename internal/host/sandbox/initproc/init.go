//go:build linux

// Package initproc is `conch sandbox-init`, the first conch process in
// a sandbox: it parses the options every backend's argv passes it, runs
// the steps common to all (wait on the block fd, claim the terminal, a
// PTY of its own, the in-container kill, the in-namespace probes) and
// calls the backend packages for theirs (bwrap's stage and mount check,
// landlock's ruleset), then execs the command.
package initproc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/host/sandbox/bwrap"
	"github.com/conchsh/conch/internal/host/sandbox/landlock"
	"github.com/creack/pty"

	"golang.org/x/sys/unix"
)

// InitMain is `conch sandbox-init [--ctty] [--landlock POLICY] [--block-fd
// N] -- ARGV…`, the first conch process inside a sandbox. It waits on the
// block fd (the supervisor moves the tree into its limit cgroups first),
// claims the PTY on fd 0 as its controlling terminal in a session of its
// own (--ctty: bwrap's PTY runs), applies Landlock and seccomp
// (--landlock), and
// execs ARGV in place, so the supervisor keeps owning the process
// directly: its PTY, its process group and its cgroup.
func InitMain(args []string) int {
	// Capabilities are per thread: drop them on the thread that execs.
	runtime.LockOSThread()
	var ctty, withPTY bool
	var policy, killSession, stage, beneath, verify string
	var allowMounts []string
	graceMs := 3000
	block := -1
	i := 0
	for ; i < len(args); i++ {
		switch args[i] {
		case "--ctty":
			ctty = true
		case "--pty":
			withPTY = true
		case "--probe":
			// --probe KIND ARG: exit 0 when the probe succeeds here.
			if i+2 >= len(args) {
				return sandbox.InitFail("--probe needs a kind and an argument")
			}
			if args[i+1] == "syscall" {
				// Prints the error of one call of the system call
				// (arguments that are harmless or invalid), or "ok".
				fmt.Println(sandbox.ProbeSyscall(args[i+2]))
				return 0
			}
			if args[i+1] == "tiocsti" {
				// Prints what TIOCSTI with this request does on fd 0
				// and on /dev/tty.
				req, err := strconv.ParseUint(args[i+2], 0, 64)
				if err != nil {
					return sandbox.InitFail("--probe tiocsti: " + err.Error())
				}
				fmt.Println(sandbox.ProbeTIOCSTI(req))
				return 0
			}
			if sandbox.ProbeDirect(args[i+1], args[i+2]) {
				return 0
			}
			return 1
		case "--kill-session", "--grace-ms":
			if i+1 >= len(args) {
				return sandbox.InitFail(args[i] + " needs a value")
			}
			if args[i] == "--kill-session" {
				killSession = args[i+1]
			} else if n, err := strconv.Atoi(args[i+1]); err == nil && n >= 0 {
				graceMs = n
			}
			i++
		case "--hold":
			return bwrap.Hold()
		case "--stage":
			if i+1 >= len(args) {
				return sandbox.InitFail("--stage needs a value")
			}
			i++
			stage = args[i]
		case "--verify-mounts":
			if i+1 >= len(args) {
				return sandbox.InitFail("--verify-mounts needs a value")
			}
			i++
			verify = args[i]
		case "--allow-mount":
			if i+1 >= len(args) {
				return sandbox.InitFail("--allow-mount needs a value")
			}
			i++
			allowMounts = append(allowMounts, args[i])
		case "--beneath":
			if i+1 >= len(args) {
				return sandbox.InitFail("--beneath needs a value")
			}
			i++
			beneath = args[i]
		case "--landlock":
			if i+1 >= len(args) {
				return sandbox.InitFail("--landlock needs a value")
			}
			i++
			policy = args[i]
		case "--block-fd":
			if i+1 >= len(args) {
				return sandbox.InitFail("--block-fd needs a value")
			}
			i++
			n, err := strconv.Atoi(args[i])
			if err != nil {
				return sandbox.InitFail("--block-fd: " + err.Error())
			}
			block = n
		case "--":
			i++
			goto run
		default:
			return sandbox.InitFail("unknown option " + args[i])
		}
	}
run:
	if killSession != "" {
		n := KillSession(killSession, time.Duration(graceMs)*time.Millisecond)
		fmt.Printf("killed %d\n", n)
		return 0
	}
	argv := args[i:]
	if len(argv) == 0 {
		return sandbox.InitFail("usage: conch sandbox-init [--ctty] [--landlock POLICY] [--block-fd N] -- COMMAND [ARG...] (internal)")
	}
	if verify != "" {
		if err := bwrap.VerifyMounts(verify, allowMounts); err != nil {
			return sandbox.InitFail("sandbox mounts: " + err.Error())
		}
	}
	if stage != "" {
		return bwrap.RunStage(stage, argv)
	}
	if beneath != "" {
		return bwrap.RunBeneath(beneath, argv)
	}
	if block >= 0 {
		var b [1]byte
		for {
			_, err := syscall.Read(block, b[:])
			if err != syscall.EINTR {
				break
			}
		}
		syscall.Close(block)
	}
	if ctty {
		if _, err := unix.Setsid(); err != nil && err != unix.EPERM {
			return sandbox.InitFail("setsid: " + err.Error())
		}
		if err := unix.IoctlSetInt(0, unix.TIOCSCTTY, 0); err != nil {
			return sandbox.InitFail("claim the terminal: " + err.Error())
		}
	}
	if policy != "" {
		raw, err := base64.StdEncoding.DecodeString(policy)
		if err != nil {
			return sandbox.InitFail("policy: " + err.Error())
		}
		var p landlock.Policy
		if err := json.Unmarshal(raw, &p); err != nil {
			return sandbox.InitFail("policy: " + err.Error())
		}
		if p.IPCNS {
			// The namespace is this thread's: the exec below (or
			// runOnPTY's fork) must happen on it.
			runtime.LockOSThread()
			if err := landlock.UnshareIPC(); err != nil {
				return sandbox.InitFail("ipc namespace: " + err.Error())
			}
		}
		if err := landlock.ApplyLandlock(p); err != nil {
			return sandbox.InitFail("landlock: " + err.Error())
		}
		if err := dropCaps(); err != nil {
			return sandbox.InitFail("drop capabilities: " + err.Error())
		}
		if err := landlock.ApplySeccomp(p.Network); err != nil {
			return sandbox.InitFail("seccomp: " + err.Error())
		}
	}
	if withPTY {
		return runOnPTY(argv)
	}
	path := argv[0]
	if lp, err := exec.LookPath(path); err == nil {
		path = lp
	}
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "conch sandbox-init: exec %s: %v\n", argv[0], err)
	if os.IsNotExist(err) {
		return 127
	}
	return 126
}

// dropCaps empties this thread's bounding, ambient, inheritable,
// permitted and effective capability sets and locks root out of getting
// them back on exec (a gateway running as root would otherwise hand the
// landlock sandbox CAP_NET_ADMIN, CAP_SYS_RAWIO, CAP_KILL, …; bwrap has
// --cap-drop ALL). Shrinking the bounding set takes CAP_SETPCAP: a
// process without it (a gateway that is not root) keeps its bounding
// set, which no longer matters once its other sets are empty, because the
// no_new_privs flag ApplySeccomp sets before the exec
// makes the kernel ignore file capabilities and set-user-ID bits.
func dropCaps() error {
	if hasCap(unix.CAP_SETPCAP) {
		for c := 0; c <= 63; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
				return err
			}
		}
	}
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	const secure = 1<<0 | 1<<1 | 1<<2 | 1<<3 // SECBIT_NOROOT(_LOCKED), SECBIT_NO_SETUID_FIXUP(_LOCKED)
	if os.Getuid() == 0 || os.Geteuid() == 0 {
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, secure, 0, 0, 0); err != nil {
			return err
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}

// runOnPTY runs argv on a PTY the init allocates itself (docker exec has
// no terminal of its own without -t) and relays it to stdin/stdout. The
// command gets its own session with the PTY as controlling terminal. The
// init stays as child subreaper and returns the command's exit code.
func runOnPTY(argv []string) int {
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 30})
	if err != nil {
		return sandbox.InitFail("pty: " + err.Error())
	}
	go io.Copy(ptmx, os.Stdin)
	done := make(chan struct{})
	go func() { io.Copy(os.Stdout, ptmx); close(done) }()
	err = cmd.Wait()
	select {
	case <-done:
	case <-time.After(500 * time.Millisecond):
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 126
	}
	return 0
}

// KillSession ends, inside a container, every process whose environment
// carries CONCH_SESSION_ID=id (every descendant of a run inherits it):
// SIGTERM, then SIGKILL after grace. It returns how many it found. This is
// the in-container kill: killing the `docker exec`
// client alone leaves the container's processes running.
func KillSession(id string, grace time.Duration) int {
	marker := []byte("CONCH_SESSION_ID=" + id + "\x00")
	inner := append([]byte{0}, marker...)
	find := func() []int {
		ents, _ := os.ReadDir("/proc")
		var out []int
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err == nil && (bytes.HasPrefix(b, marker) || bytes.Contains(b, inner)) {
				out = append(out, pid)
			}
		}
		return out
	}
	pids := find()
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for len(find()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; i < 50; i++ {
		left := find()
		if len(left) == 0 {
			break
		}
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return len(pids)
}

// hasCap reports whether capability c is in this thread's effective set.
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return true // try, and let the drop report its error
	}
	return data[c/32].Effective&(1<<(uint(c)%32)) != 0
}
