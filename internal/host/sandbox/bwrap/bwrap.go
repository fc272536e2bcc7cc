//go:build linux

// Package bwrap is the bubblewrap sandbox backend: user, pid, ipc, uts,
// cgroup, mount and (unless network=open) network namespaces, read-only
// system binds and a seccomp program, no daemon. It holds both halves of
// the backend: the argv the supervisor runs (Bwrap.Command), and the
// steps `conch sandbox-init` performs for it (a root gateway's staged
// idmapped mounts, RunStage; binds taken as descriptors below the
// workspace, RunBeneath; the mount check inside, VerifyMounts).
package bwrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

// Bwrap is the bubblewrap backend.
type Bwrap struct {
	Path  string // "bwrap" (looked up on PATH) or an absolute path
	probe sandbox.Probe
	bin   string
	// fdBinds: this bwrap takes --bind-fd/--ro-bind-fd (beneath.go).
	fdBinds bool
}

// Name implements Backend.
func (b *Bwrap) Name() string { return "bwrap" }

// ErrNoBwrap explains a missing bubblewrap.
var ErrNoBwrap = errors.New("bubblewrap (bwrap) is not installed or not on PATH; install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) or set sandbox.bwrap.path")

// Available finds bwrap and runs a trial sandbox.
func (b *Bwrap) Available(ctx context.Context) error {
	return b.probe.Get(ctx, func() error {
		p := b.Path
		if p == "" {
			p = "bwrap"
		}
		bin, err := exec.LookPath(p)
		if err != nil {
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
				return ErrNoBwrap
			}
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true").CombinedOutput()
		if err != nil {
			return fmt.Errorf("bwrap trial run failed (%v): %s (are unprivileged user namespaces enabled? sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)", err, strings.TrimSpace(string(out)))
		}
		b.bin, b.fdBinds = bin, bindFDVersion(bin)
		return nil
	})
}

// Prepare makes the scope home and the seccomp program.
func (b *Bwrap) Prepare(ctx context.Context, r *sandbox.Run) error {
	if err := os.MkdirAll(filepath.Join(sandbox.ScopeDir(r.Home, r.Settings.Scope), "home"), 0o700); err != nil {
		return err
	}
	if sandbox.Staged(r.Settings.RunAsUID, r.Settings.RunAsGID) {
		if err := os.MkdirAll(StageDir, 0o755); err != nil {
			return err
		}
	}
	return writeBwrapFilter(r.Home, r.Settings.Network == "open")
}

// Remove has nothing to remove for bwrap.
func (b *Bwrap) Remove(ctx context.Context, scope string) error { return nil }

// Layers implements Backend.
func (b *Bwrap) Layers(r *sandbox.Run) []string {
	l := []string{"bwrap", "userns", "pidns", "ipcns", "utsns", "cgroupns", "mountns"}
	if r.Settings.Network != "open" {
		l = append(l, "netns")
	}
	l = append(l, "seccomp")
	if r.Settings.WorkspaceAccess == "rw" {
		l = append(l, "git-"+r.Settings.GitAccess)
	}
	if sandbox.Staged(r.Settings.RunAsUID, r.Settings.RunAsGID) {
		l = append(l, fmt.Sprintf("uid-%d", r.Settings.RunAsUID))
	}
	return l
}

// systemRO are the system directories bound read-only (each only if it exists).
var systemRO = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store"}

// Command builds the bwrap argv. It always asks bwrap to wait on fd 3
// (--block-fd) so the supervisor can put the whole tree into its limit
// cgroups before anything runs.
func (b *Bwrap) Command(r *sandbox.Run) ([]string, []string, error) {
	bin := b.bin
	if bin == "" {
		if err := b.Available(context.Background()); err != nil {
			return nil, nil, err
		}
		bin = b.bin
	}
	s := r.Settings
	view := sandbox.NewView(r.Workspace, s, "bwrap")
	cwd, ok := view.MapIn(r.Cwd)
	if !ok {
		cwd = view.Inside
	}
	// A root gateway runs bwrap as sandbox.runAs (runas.go): the
	// workspace, the scope home and the binary come from StageDir.
	stage := sandbox.Staged(s.RunAsUID, s.RunAsGID)
	src, home, exe := r.Workspace, filepath.Join(sandbox.ScopeDir(r.Home, s.Scope), "home"), r.Exe
	if stage {
		src, home, exe = filepath.Join(StageDir, "ws"), filepath.Join(StageDir, "home"), filepath.Join(StageDir, "conch")
	}
	a := []string{bin, "--unshare-all"}
	if s.Network == "open" {
		a = append(a, "--share-net")
	}
	// No --new-session: without a PTY the command stays in its
	// supervisor's session, which has no controlling terminal; with one
	// the init makes a session of its own (--ctty below). bwrap has the
	// flag against TIOCSTI, which the seccomp program refuses
	// (sandbox.DeniedIoctls); a new session is also a new scheduler group
	// under kernel autogroup, which costs a sandboxed command 10-20 ms on
	// a loaded machine (docs/sandbox.md).
	a = append(a, "--die-with-parent", "--hostname", "conch-sandbox")
	a = append(a, "--ro-bind", "/usr", "/usr")
	for _, d := range systemRO[1:] {
		a = append(a, "--ro-bind-try", d, d)
	}
	for _, x := range s.ROBinds {
		src, dst := sandbox.SplitBind(x)
		if err := sandbox.CheckBind(r.Home, src); err != nil {
			return nil, nil, err
		}
		a = append(a, "--ro-bind", src, dst)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run")
	if s.Network == "open" {
		a = append(a, "--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve")
	}
	// The user's home and the conch home must stay out of sight even when
	// they lie below a directory bound above (/opt/…, /usr/…).
	uh, _ := os.UserHomeDir()
	for _, p := range []string{uh, r.Home} {
		if p != "" && underAny(p, systemRO) {
			a = append(a, "--tmpfs", p)
		}
	}
	a = append(a, "--bind", home, sandbox.InsideHome)
	mode := "--bind"
	if s.WorkspaceAccess == "ro" {
		mode = "--ro-bind"
	}
	a = append(a, mode, src, view.Inside)
	// A read-only mount alone does not protect a path: the command could
	// rename the directory above it (mv .git .git-old) and make a new
	// one. So every directory between the workspace and a protected path
	// is bound onto itself first; a mount point cannot be renamed or
	// removed.
	var ro []string
	for _, p := range s.ProtectPaths {
		ok, err := protectable(r.Workspace, p)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			ro = append(ro, filepath.Clean(p))
		}
	}
	if s.WorkspaceAccess != "ro" {
		// The repositories of the workspace (internal/host/sandbox/git.go).
		g, err := sandbox.GitProtected(r.Home, r.Workspace, s.GitAccess)
		if err != nil {
			return nil, nil, err
		}
		ro = append(ro, g...)
	}
	ro = outermost(ro)
	var parents []string
	for _, p := range ro {
		for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
			if !slices.Contains(parents, d) {
				parents = append(parents, d)
			}
		}
	}
	// bwrap resolves a bind's source on the host and its destination in
	// the new root, both following symbolic links; the command wrote the
	// workspace, so a link on the way (link -> .., .git/commondir ->
	// ../..) would bind a directory of the host it chose, writable for
	// the parents. Every path bound below the workspace must be real.
	for _, p := range append(slices.Clone(ro), parents...) {
		if err := sandbox.RealBelow(r.Workspace, p); err != nil {
			return nil, nil, err
		}
	}
	// Shallow first, so that a deeper bind is not covered.
	byDepth := func(x, y string) int { return strings.Count(x, "/") - strings.Count(y, "/") }
	slices.SortFunc(parents, byDepth)
	slices.SortFunc(ro, byDepth)
	if s.WorkspaceAccess != "ro" {
		for _, d := range parents {
			a = append(a, "--bind", filepath.Join(src, d), filepath.Join(view.Inside, d))
		}
	}
	for _, p := range ro {
		a = append(a, "--ro-bind", filepath.Join(src, p), filepath.Join(view.Inside, p))
	}
	r.Protected, r.ProtectedReadOnly = ro, true
	for _, x := range s.Binds {
		src, dst := sandbox.SplitBind(x)
		if err := sandbox.CheckBind(r.Home, src); err != nil {
			return nil, nil, err
		}
		a = append(a, "--bind", src, dst)
	}
	a = append(a, "--ro-bind", exe, sandbox.InsideExe, "--chdir", cwd, "--block-fd", "3", "--cap-drop", "ALL")
	r.BlockFD = true
	// The seccomp program (filter.go) is opened by the supervisor on fd
	// 4; bwrap loads it just before it execs the command.
	r.Files = []string{BwrapFilter(r.Home, s.Network == "open")}
	a = append(a, "--seccomp", "4")
	a = append(a, "--")
	var init []string
	if s.WorkspaceAccess != "ro" && len(ro) > 0 {
		// What bwrap mounted below the workspace is what was asked
		// (mounts.go): a process of an earlier run may have raced it.
		init = append(init, "--verify-mounts", view.Inside)
		// The configured binds may land in the workspace on purpose.
		for _, x := range append(slices.Clone(s.ROBinds), s.Binds...) {
			_, dst := sandbox.SplitBind(x)
			init = append(init, "--allow-mount", filepath.Clean(dst))
		}
	}
	if r.PTY {
		// The init makes a session of its own and claims the run's PTY
		// (fd 0) as its controlling terminal before it execs the shell:
		// job control works inside, and the terminal's signals reach
		// only the sandbox's processes, not bwrap outside.
		init = append(init, "--ctty")
		r.CttyInside = true
	}
	if len(init) > 0 {
		a = append(append(append(a, sandbox.InsideExe, "sandbox-init"), init...), "--")
	}
	a = append(a, "/bin/sh", "-lc", r.Command)
	if stage {
		st := Stage{Workspace: r.Workspace, Home: filepath.Join(sandbox.ScopeDir(r.Home, s.Scope), "home"), Exe: r.Exe,
			UID: s.RunAsUID, GID: s.RunAsGID, ReadOnly: s.WorkspaceAccess == "ro", Beneath: b.fdBinds && len(ro) > 0}
		if fi, err := os.Stat(r.Workspace); err == nil {
			if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
				st.OwnerUID, st.OwnerGID = int(sys.Uid), int(sys.Gid)
			}
		}
		// Best effort: a stage without them makes its own namespaces.
		st.RootNS, _ = heldUserns(0, 0, st.UID, st.GID)
		if st.OwnerUID != 0 || st.OwnerGID != 0 {
			st.WsNS, _ = heldUserns(st.OwnerUID, st.OwnerGID, st.UID, st.GID)
		}
		a = append([]string{r.Exe, "sandbox-init", "--stage", encodeStage(st), "--"}, a...)
	} else if b.fdBinds && len(ro) > 0 {
		a = append([]string{r.Exe, "sandbox-init", "--beneath", src, "--"}, a...)
	}
	return a, r.Env, nil
}

// protectable reports whether the protected path p exists below
// workspace. The sandboxed command can write the workspace, so it may
// have replaced p (or a directory above it) with a symbolic link: bwrap
// resolves a bind's source on the host and its destination inside the
// new root, so a link like .conch -> ../../../tmp would show the host's
// /tmp inside. Such a path fails the run instead (fail closed).
func protectable(workspace, p string) (bool, error) {
	cur := workspace
	for _, part := range strings.Split(filepath.Clean(p), "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return false, nil
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return false, fmt.Errorf("the protected path %s is a symbolic link (%s); remove it on the host", filepath.Join(workspace, p), cur)
		}
	}
	return true, nil
}

func underAny(p string, roots []string) bool {
	for _, r := range roots {
		src, _ := sandbox.SplitBind(r)
		if _, ok := sandbox.Within(src, p); ok {
			return true
		}
	}
	return false
}

// outermost drops the paths that lie below another path of ps.
func outermost(ps []string) []string {
	var out []string
	for _, p := range ps {
		covered := false
		for _, q := range ps {
			if _, ok := sandbox.Within(q, p); ok && q != p {
				covered = true
				break
			}
		}
		if !covered && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func init() {
	sandbox.Register("bwrap", sandbox.Factory{
		New: func(s config.SandboxSettings) sandbox.Backend { return &Bwrap{Path: s.BwrapPath} },
		Key: func(s config.SandboxSettings) string { return s.BwrapPath },
	})
}
