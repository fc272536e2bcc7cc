//go:build linux

package initproc

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/host/sandbox/landlock"
	"golang.org/x/sys/unix"
)

// The test binary also plays the commands the init runs, so that what
// they report is read from inside the process the init exec'd (an init
// function: the package's TestMain is init_test.go's).
//
//	initproc.test probe-syscalls NAME…   prints NAME=RESULT for each (sandbox.ProbeSyscall)
//	initproc.test probe-socket           prints the result of socket(AF_INET, SOCK_STREAM)
func init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "probe-syscalls":
		for _, name := range os.Args[2:] {
			fmt.Printf("%s=%s\n", name, sandbox.ProbeSyscall(name))
		}
		os.Exit(0)
	case "probe-socket":
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			fmt.Println(unix.ErrnoName(err.(syscall.Errno)))
		} else {
			unix.Close(fd)
			fmt.Println("ok")
		}
		os.Exit(0)
	}
}

// landlockPolicy is a policy that lets the command read the system and
// the test binary (which plays the command) and write nowhere.
func landlockPolicy(t *testing.T, network bool) string {
	t.Helper()
	if sandbox.LandlockABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := landlock.Policy{RO: []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/dev", filepath.Dir(self)}, Network: network}
	b, _ := json.Marshal(p)
	return base64.StdEncoding.EncodeToString(b)
}

// selfCmd is the init asked to exec the test binary itself as the command.
func selfCmd(t *testing.T, initArgs []string, probe ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return initCmd(t, append(append(initArgs, "--", self), probe...)...)
}

// TestInitClosesTheBlockFD: the descriptor the init waits on is closed
// before the command runs, so the command starts with the standard three
// and nothing else, with and without Landlock. The supervisor marks every
// descriptor it inherited close-on-exec when it starts; the test does the
// same to itself first, so that the init gets what the test passes and
// nothing its own starter leaked. The descriptors are read from outside,
// in /proc, once the init has exec'd the shell (same pid).
func TestInitClosesTheBlockFD(t *testing.T) {
	markInheritedCloseOnExec(t)
	cases := map[string][]string{
		"plain":    {"--block-fd", "3"},
		"landlock": {"--landlock", landlockPolicy(t, false), "--block-fd", "3"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd := initCmd(t, append(args, "--", "/bin/sh", "-c", "read x")...)
			cmd.ExtraFiles = []*os.File{r}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stdin.Close(); cmd.Wait() }()
			r.Close()
			w.Close() // release the init
			proc := fmt.Sprintf("/proc/%d/", cmd.Process.Pid)
			shell, _ := filepath.EvalSymlinks("/bin/sh")
			deadline := time.Now().Add(30 * time.Second)
			for {
				if exe, _ := os.Readlink(proc + "exe"); exe == shell {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the init did not exec %s", shell)
				}
				time.Sleep(5 * time.Millisecond)
			}
			ents, err := os.ReadDir(proc + "fd")
			if err != nil {
				t.Fatal(err)
			}
			var fds []string
			for _, e := range ents {
				l, _ := os.Readlink(proc + "fd/" + e.Name())
				fds = append(fds, e.Name()+"->"+l)
			}
			if len(fds) != 3 || !strings.HasPrefix(fds[0], "0->") || !strings.HasPrefix(fds[1], "1->") || !strings.HasPrefix(fds[2], "2->") {
				t.Fatalf("the command started with descriptors %q, want only 0, 1 and 2", fds)
			}
		})
	}
}

// markInheritedCloseOnExec marks this test process's descriptors from 3
// close-on-exec, as the supervisor does at its start (what the test's
// own starter leaked would otherwise reach every child).
func markInheritedCloseOnExec(t *testing.T) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// TestLandlockInitInstallsTheFilter: the filter the landlock init loads
// is the sandbox's own, not merely some filter: every refused system call
// the architecture has (sandbox.DeniedSyscalls and sandbox.IPCSyscalls,
// the lists docs/sandbox.md shows) fails with EPERM inside, clone with a
// namespace flag too, clone3 with ENOSYS, and socket(AF_INET) with EPERM
// when the network is closed but not when it is open. The System V IPC
// calls are checked to pass outside first, so the test tells the filter
// from a missing capability.
func TestLandlockInitInstallsTheFilter(t *testing.T) {
	names := append(sandbox.NativeSyscalls(sandbox.DeniedSyscalls), sandbox.NativeSyscalls(sandbox.IPCSyscalls)...)
	names = append(names, "clone", "clone3")
	if len(names) < 40 {
		t.Fatalf("only %d system calls known here: %v", len(names), names)
	}
	self, _ := os.Executable()
	outside, err := exec.Command(self, append([]string{"probe-syscalls"}, "shmget", "msgget", "semget")...).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(outside), "EPERM") {
		t.Fatalf("outside any sandbox the IPC calls already fail with EPERM:\n%s", outside)
	}
	out, err := selfCmd(t, []string{"--landlock", landlockPolicy(t, false)}, append([]string{"probe-syscalls"}, names...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	for _, name := range names {
		want := "EPERM"
		if name == "clone3" {
			want = "ENOSYS"
		}
		if got[name] != want {
			t.Errorf("%s inside the landlock init: %q, want %s", name, got[name], want)
		}
	}
	for _, network := range []bool{false, true} {
		out, err := selfCmd(t, []string{"--landlock", landlockPolicy(t, network)}, "probe-socket").CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		want := "EPERM"
		if network {
			want = "ok"
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("socket(AF_INET) with network=%v: %q, want %s", network, got, want)
		}
	}
}

// nobodyCopy copies the test binary where the unprivileged user nobody
// may run it, and returns its path.
func nobodyCopy(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "initproc-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "initproc.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// asNobody runs exe (the copied test binary) as uid/gid 65534.
func asNobody(exe string, args ...string) *exec.Cmd {
	cmd := exec.Command(exe, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	return cmd
}

// TestLandlockInitAsAnUnprivilegedUser: a gateway that is not root runs
// landlock sandboxes too (Landlock needs no privilege). Its init cannot
// shrink the bounding set (that takes CAP_SETPCAP), which is harmless
// under no_new_privs; it still empties every other set, loads the filter
// and runs the command. An init as that user that is asked for an IPC
// namespace it cannot make (a step that fails) never runs the command.
func TestLandlockInitAsAnUnprivilegedUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process as nobody")
	}
	if sandbox.LandlockABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	exe := nobodyCopy(t)
	p := landlock.Policy{RO: []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/dev", filepath.Dir(exe)}}
	b, _ := json.Marshal(p)
	out, err := asNobody(exe, "sandbox-init", "--landlock", base64.StdEncoding.EncodeToString(b), "--",
		"/bin/sh", "-c", `grep -E '^(Uid|Cap(Inh|Prm|Eff|Amb)|NoNewPrivs|Seccomp):' /proc/self/status`).CombinedOutput()
	if err != nil {
		t.Fatalf("the landlock init as nobody: %v: %s", err, out)
	}
	for _, want := range []string{"Uid:\t65534", "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}

	// Fails closed: the IPC namespace step errors (nobody may not
	// unshare it), so the command never runs.
	p.IPCNS = true
	b, _ = json.Marshal(p)
	out, err = asNobody(exe, "sandbox-init", "--landlock", base64.StdEncoding.EncodeToString(b), "--", "/bin/echo", "RAN").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 || strings.Contains(string(out), "RAN") || !strings.Contains(string(out), "conch sandbox-init: ipc namespace: ") {
		t.Fatalf("an IPC namespace the init cannot make: %v: %s (want exit 125, the reason, and no run)", err, out)
	}
}

// TestInitFailsClosedOnAFailedCheck: a check the init runs before the
// command (the workspace mount of --verify-mounts) that fails ends it
// with 125 and the reason; the command never runs.
func TestInitFailsClosedOnAFailedCheck(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	out, err := initCmd(t, "--verify-mounts", filepath.Join(t.TempDir(), "not-a-mount"), "--", "/bin/sh", "-c", "touch "+marker).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), "conch sandbox-init: sandbox mounts: ") {
		t.Fatalf("a workspace that is not mounted: %v: %s (want exit 125 and the reason)", err, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran after a failed mount check")
	}
}
