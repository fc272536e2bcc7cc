package sandbox

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// InitMain is `conch sandbox-init [--ctty] [--landlock POLICY] [--block-fd
// N] -- ARGV…`, the first conch process inside a sandbox. It waits on the
// block fd (the supervisor moves the tree into its limit cgroups first),
// claims the PTY on fd 0 as its controlling terminal (--ctty, inside
// bwrap's new session), applies Landlock and seccomp (--landlock), and
// execs ARGV in place, so the supervisor keeps owning the process
// directly: its PTY, its process group and its cgroup.
func InitMain(args []string) int {
	var ctty bool
	var policy string
	block := -1
	i := 0
	for ; i < len(args); i++ {
		switch args[i] {
		case "--ctty":
			ctty = true
		case "--landlock":
			if i+1 >= len(args) {
				return initFail("--landlock needs a value")
			}
			i++
			policy = args[i]
		case "--block-fd":
			if i+1 >= len(args) {
				return initFail("--block-fd needs a value")
			}
			i++
			n, err := strconv.Atoi(args[i])
			if err != nil {
				return initFail("--block-fd: " + err.Error())
			}
			block = n
		case "--":
			i++
			goto run
		default:
			return initFail("unknown option " + args[i])
		}
	}
run:
	argv := args[i:]
	if len(argv) == 0 {
		return initFail("usage: conch sandbox-init [--ctty] [--landlock POLICY] [--block-fd N] -- COMMAND [ARG...] (internal)")
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
			return initFail("setsid: " + err.Error())
		}
		if err := unix.IoctlSetInt(0, unix.TIOCSCTTY, 0); err != nil {
			return initFail("claim the terminal: " + err.Error())
		}
	}
	if policy != "" {
		raw, err := base64.StdEncoding.DecodeString(policy)
		if err != nil {
			return initFail("policy: " + err.Error())
		}
		var p Policy
		if err := json.Unmarshal(raw, &p); err != nil {
			return initFail("policy: " + err.Error())
		}
		if err := applyLandlock(p); err != nil {
			return initFail("landlock: " + err.Error())
		}
		if err := applySeccomp(p.Network); err != nil {
			return initFail("seccomp: " + err.Error())
		}
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

func initFail(msg string) int {
	fmt.Fprintln(os.Stderr, "conch sandbox-init: "+msg)
	return 125
}
