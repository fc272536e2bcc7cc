//go:build linux

// Package landlock is the daemon-less fallback sandbox backend: `conch
// sandbox-init --landlock POLICY` applies a Landlock ruleset, drops its
// capabilities and loads a seccomp filter, then execs the shell. It holds
// the policy the gateway builds (Landlock.Command) and its enforcement
// in the sandbox (ApplyLandlock, ApplySeccomp).
package landlock

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Landlock is the daemon-less fallback: `conch
// sandbox-init --landlock` applies a Landlock ruleset and a seccomp filter
// to itself, then execs the shell. Paths are the host's.
type Landlock struct {
	probe sandbox.Probe
}

// Name implements Backend.
func (l *Landlock) Name() string { return "landlock" }

// Available checks for Landlock ABI >= 1 and seccomp filter support.
func (l *Landlock) Available(ctx context.Context) error {
	return l.probe.Get(ctx, func() error {
		if sandbox.LandlockABI() < 1 {
			return errors.New("the kernel does not offer Landlock (needs Linux >= 5.13 with landlock in the lsm= list)")
		}
		if !seccomp.Supported() {
			return errors.New("the kernel does not support seccomp filters")
		}
		return nil
	})
}

// Prepare makes the scope home and temp directory.
func (l *Landlock) Prepare(ctx context.Context, r *sandbox.Run) error {
	for _, d := range []string{"home", "tmp"} {
		if err := os.MkdirAll(filepath.Join(sandbox.ScopeDir(r.Home, r.Settings.Scope), d), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// Remove has nothing to remove.
func (l *Landlock) Remove(ctx context.Context, scope string) error { return nil }

// Layers implements Backend.
func (l *Landlock) Layers(r *sandbox.Run) []string {
	return LayersFor(sandbox.LandlockABI(), r.Settings.Network, IPCNamespace())
}

// LayersFor names the layers of a landlock run at Landlock ABI abi with
// the network setting network, ipcns when the init makes an IPC namespace
// (IPCNamespace). The table of docs/sandbox.md that sets bwrap's layers
// against these is checked against it.
func LayersFor(abi int, network string, ipcns bool) []string {
	out := []string{fmt.Sprintf("landlock-abi-%d", abi), "landlock-fs"}
	if network != "open" {
		if abi >= 4 {
			out = append(out, "landlock-tcp")
		}
	}
	if abi >= 6 {
		out = append(out, "landlock-scope-signal", "landlock-scope-abstract-unix")
	}
	if ipcns {
		out = append(out, "ipcns")
	}
	out = append(out, "seccomp", "seccomp-ipc", "no-new-privs")
	return out
}

// IPCNamespace reports whether `sandbox-init --landlock`, started by this
// process, can give the command an IPC namespace of its own: when it may
// unshare(CLONE_NEWIPC), which takes CAP_SYS_ADMIN (a root gateway
// outside a restricted container). It is tried once, on a thread of this
// process that is thrown away afterwards. Without it the seccomp filter
// still refuses every System V and POSIX message queue call, but
// /proc/sysvipc lists the host's objects (keys, ids, sizes, owners).
var IPCNamespace = sync.OnceValue(func() bool {
	ok := make(chan bool)
	go func() {
		// Never unlocked: the goroutine's end ends the thread, with the
		// namespace it made.
		runtime.LockOSThread()
		ok <- unix.Unshare(unix.CLONE_NEWIPC) == nil
	}()
	return <-ok
})

// Policy is what `sandbox-init --landlock` enforces.
type Policy struct {
	RO      []string `json:"ro"`
	RW      []string `json:"rw"`
	Network bool     `json:"network"` // network=open
	// Etc is what every user may read of /etc, walked by a root gateway
	// (cachedEtcReadable) so each run need not walk it again. Without it
	// a root init walks /etc itself.
	Etc *EtcRules `json:"etc,omitempty"`
	// IPCNS: the init gives the command an IPC namespace of its own
	// (UnshareIPC) or fails.
	IPCNS bool `json:"ipcns,omitempty"`
}

// Command runs the init with the encoded policy.
func (l *Landlock) Command(r *sandbox.Run) ([]string, []string, error) {
	s := r.Settings
	scope := sandbox.ScopeDir(r.Home, s.Scope)
	p := Policy{Network: s.Network == "open", IPCNS: IPCNamespace()}
	p.RO = append([]string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store", "/proc"}, nil...)
	for _, x := range s.ROBinds {
		src, _ := sandbox.SplitBind(x)
		if err := sandbox.CheckBind(r.Home, src); err != nil {
			return nil, nil, err
		}
		p.RO = append(p.RO, src)
	}
	if s.WorkspaceAccess == "ro" {
		p.RO = append(p.RO, r.Workspace)
	} else {
		p.RW = append(p.RW, r.Workspace)
		r.Protected = guarded(r)
	}
	p.RW = append(p.RW, filepath.Join(scope, "home"), filepath.Join(scope, "tmp"))
	for _, x := range s.Binds {
		src, _ := sandbox.SplitBind(x)
		if err := sandbox.CheckBind(r.Home, src); err != nil {
			return nil, nil, err
		}
		p.RW = append(p.RW, src)
	}
	if os.Geteuid() == 0 {
		e := cachedEtcReadable("/etc")
		p.Etc = &e
	}
	b, _ := json.Marshal(p)
	env := append([]string{}, r.Env...)
	env = setEnv(env, "HOME", filepath.Join(scope, "home"))
	env = setEnv(env, "TMPDIR", filepath.Join(scope, "tmp"))
	argv := []string{r.Exe, "sandbox-init", "--landlock", base64.StdEncoding.EncodeToString(b), "--block-fd", "3", "--", "/bin/sh", "-lc", r.Command}
	r.BlockFD = true
	return argv, env, nil
}

// guarded returns what a run checks and puts back when it ends
// (sandbox.Guard): Landlock grants rights on a whole directory tree, so
// it cannot keep the workspace's repositories (or sandbox.protectPaths)
// read-only inside a writable workspace the way bwrap's mounts do; the
// check after the run is all it has. A repository search that fails (a
// .git that is a symbolic link) leaves the repositories unchecked.
func guarded(r *sandbox.Run) []string {
	var out []string
	for _, p := range r.Settings.ProtectPaths {
		if _, err := os.Lstat(filepath.Join(r.Workspace, p)); err == nil && sandbox.RealBelow(r.Workspace, p) == nil {
			out = append(out, filepath.Clean(p))
		}
	}
	g, err := sandbox.GitProtected(r.Home, r.Workspace, r.Settings.GitAccess)
	if err == nil {
		out = append(out, g...)
	}
	return out
}

func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if len(kv) > len(k) && kv[:len(k)+1] == k+"=" {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

// ApplyLandlock restricts this process (and everything it execs) to p.
func ApplyLandlock(p Policy) error {
	cfg := landlock.V11.BestEffort()
	if p.Network {
		cfg = landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}.BestEffort()
	}
	ro := p.RO
	var closed []landlock.Rule
	if os.Geteuid() == 0 {
		// Root without capabilities still owns root's files: grant only
		// what every user may read of /etc (shadow, sudoers, private keys
		// stay closed). Landlock keeps host paths, so the command cannot
		// run as another uid the way bwrap's does (bwrap/runas.go).
		ro = slices.DeleteFunc(slices.Clone(ro), func(d string) bool { return d == "/etc" })
		var e EtcRules
		if p.Etc != nil {
			e = *p.Etc
		} else {
			e = etcReadable("/etc", nil)
		}
		closed = append(closed, landlock.RODirs(e.Dirs...).IgnoreIfMissing(), landlock.ROFiles(e.Files...).IgnoreIfMissing(),
			landlock.PathAccess(llsys.AccessFSReadDir, e.Listed...).IgnoreIfMissing())
	}
	rules := []landlock.Rule{
		landlock.RODirs(ro...).IgnoreIfMissing(),
		landlock.RWDirs(p.RW...).IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom").IgnoreIfMissing(),
		landlock.RWFiles("/dev/tty", "/dev/ptmx").WithIoctlDev().IgnoreIfMissing(),
	}
	rules = append(rules, closed...)
	// Only the run's own terminal, not all of /dev/pts: the user's other
	// terminals (other sessions' PTYs) would give their input and output.
	if own := ownTerminals(); len(own) > 0 {
		rules = append(rules, landlock.RWFiles(own...).WithIoctlDev().IgnoreIfMissing())
	}
	return cfg.Restrict(rules...)
}

// ownTerminals names the /dev/pts devices on stdin, stdout and stderr.
func ownTerminals() []string {
	var out []string
	for fd := 0; fd <= 2; fd++ {
		p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err == nil && strings.HasPrefix(p, "/dev/pts/") && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// UnshareIPC moves the calling thread into a new IPC namespace: the
// caller must hold it (runtime.LockOSThread) until it execs or forks the
// command, which inherit that thread's namespaces.
func UnshareIPC() error {
	return unix.Unshare(unix.CLONE_NEWIPC)
}

// ApplySeccomp loads the sandbox's filter: the common list, the IPC calls
// (sandbox.IPCSyscalls: with or without an IPC namespace of its own, the
// command has no use for them that is worth a host object reached by
// mistake), and the socket families below.
func ApplySeccomp(network bool) error {
	var families []uint64
	if !network {
		families = append(families, unix.AF_INET, unix.AF_INET6, unix.AF_PACKET, unix.AF_VSOCK)
	}
	if sandbox.LandlockABI() < 9 {
		// Below ABI 9 Landlock does not restrict connect(2) to pathname
		// UNIX sockets: the engine socket (operator rights), docker's,
		// tmux's would all be reachable. socketpair(2) still works.
		families = append(families, unix.AF_UNIX)
	}
	raw, err := sandbox.FilterProgram(families, sandbox.IPCSyscalls...)
	if err != nil {
		return err
	}
	return sandbox.LoadFilter(raw)
}

func init() {
	sandbox.Register("landlock", sandbox.Factory{New: func(config.SandboxSettings) sandbox.Backend { return &Landlock{} }})
}
