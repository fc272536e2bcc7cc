package seatbelt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/conchsh/conch/internal/host/sandbox"
)

// Seatbelt is the macOS backend: the command runs as `sandbox-exec -p
// PROFILE -D … -- /bin/sh -lc COMMAND`, with the host's paths (the
// workspace is where it is on the host, like landlock's). Its zero value
// is the real backend; the fields replace what the tests cannot have
// here. Not yet run on macOS: the command line and the profile are
// checked on Linux, what sandbox-exec makes of them only by the escape
// test of escape_darwin_test.go, which waits for a Mac.
type Seatbelt struct {
	// Exec is the sandbox-exec program (SandboxExec when empty).
	Exec string
	// UserHome is the user's home, hidden from the command
	// (os.UserHomeDir when empty).
	UserHome string
	// Canon canonicalises a path as the kernel reports it (Canon when
	// nil).
	Canon func(string) string

	probe sandbox.Probe
}

var _ sandbox.Backend = (*Seatbelt)(nil)

// Name implements sandbox.Backend.
func (b *Seatbelt) Name() string { return "seatbelt" }

func (b *Seatbelt) exec() string {
	if b.Exec != "" {
		return b.Exec
	}
	return SandboxExec
}

// Available reports whether sandbox-exec is there to run. Apple marks it
// deprecated; should it be removed, every sandboxed run fails closed
// (sandbox_unavailable), never runs unsandboxed.
func (b *Seatbelt) Available(ctx context.Context) error {
	return b.probe.Get(ctx, func() error {
		fi, err := os.Stat(b.exec())
		if err != nil {
			return fmt.Errorf("%s: %w (Seatbelt exists only on macOS)", b.exec(), err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", b.exec())
		}
		return nil
	})
}

// Prepare makes the scope home and temporary directory.
func (b *Seatbelt) Prepare(ctx context.Context, r *sandbox.Run) error {
	for _, d := range []string{"home", "tmp"} {
		if err := os.MkdirAll(filepath.Join(sandbox.ScopeDir(r.Home, r.Settings.Scope), d), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// Remove has nothing to remove.
func (b *Seatbelt) Remove(ctx context.Context, scope string) error { return nil }

// Layers names what the profile enforces: file rules, signals and
// process information only inside the sandbox, no Mach service but user
// lookups, and with network none no socket at all.
func (b *Seatbelt) Layers(r *sandbox.Run) []string {
	out := []string{"seatbelt", "seatbelt-fs", "seatbelt-signal", "seatbelt-mach"}
	if r.Settings.Network != "open" {
		out = append(out, "seatbelt-net")
	}
	return out
}

// Gaps implements sandbox.Gapped: what a bwrap sandbox gives that this
// one cannot.
func (b *Seatbelt) Gaps(r *sandbox.Run) []string {
	return []string{
		"session limits (memory, pids, cpus): macOS has no cgroups, so none is enforced",
		"system call filter: there is no seccomp; Seatbelt checks operations (files, network, signals, Mach services), not calls",
		"private loopback: network none means no socket at all, so a server inside cannot listen",
		"PID view: host processes stay visible to ps (signals and process information are limited to the sandbox)",
		"file system: outside your home and the conch home it stays readable; there is no private /tmp",
		"protected names in another Unicode normalization (APFS equates é and e + ◌́) are not denied; other letter cases (.GIT/hooks) are",
	}
}

// Command builds the sandbox-exec command line of r and its environment
// (HOME and TMPDIR are the scope's). It fails on a protected path that
// has a symbolic link on its way: the command could retarget it.
func (b *Seatbelt) Command(r *sandbox.Run) ([]string, []string, error) {
	if r.Settings.Network != "open" && r.Settings.Network != "none" {
		return nil, nil, fmt.Errorf("seatbelt: network %q: want none or open", r.Settings.Network)
	}
	pol, protected, err := b.policy(r)
	if err != nil {
		return nil, nil, err
	}
	canon := b.Canon
	if canon == nil {
		canon = Canon
	}
	prof, err := Generate(pol, canon)
	if err != nil {
		return nil, nil, err
	}
	r.Protected, r.ProtectedReadOnly = protected, true
	env := append([]string{}, r.Env...)
	env = setEnv(env, "HOME", pol.ScopeHome)
	env = setEnv(env, "TMPDIR", pol.ScopeTmp)
	return prof.Args("/bin/sh", "-lc", r.Command), env, nil
}

// policy is the Policy of r, and the protected paths that exist (for the
// sandbox.Guard that checks them after the run).
func (b *Seatbelt) policy(r *sandbox.Run) (Policy, []string, error) {
	s := r.Settings
	home := b.UserHome
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	scope := sandbox.ScopeDir(r.Home, s.Scope)
	pol := Policy{
		Workspace: r.Workspace, Access: "rw", GitAccess: s.GitAccess, Network: s.Network,
		Home: home, ConchHome: r.Home, PTY: r.PTY,
		ScopeHome: filepath.Join(scope, "home"), ScopeTmp: filepath.Join(scope, "tmp"),
	}
	switch s.WorkspaceAccess {
	case "ro":
		pol.Access = "ro"
	case "none":
		// r.Workspace is the scope's private one; the agent's own is
		// hidden even where it lies outside the user's home.
		if r.HostWorkspace != "" && r.HostWorkspace != r.Workspace {
			pol.Hidden = append(pol.Hidden, r.HostWorkspace)
		}
	}
	for _, x := range s.ROBinds {
		src, _ := sandbox.SplitBind(x)
		if err := sandbox.CheckBind(r.Home, src); err != nil {
			return Policy{}, nil, err
		}
		pol.Read = append(pol.Read, src)
	}
	for _, x := range s.Binds {
		src, _ := sandbox.SplitBind(x)
		if err := sandbox.CheckBind(r.Home, src); err != nil {
			return Policy{}, nil, err
		}
		pol.Write = append(pol.Write, src)
	}
	if pol.Access == "ro" {
		return pol, nil, nil
	}
	rels := append([]string{}, s.ProtectPaths...)
	// The repositories of the workspace (internal/host/sandbox/git.go), as
	// bwrap mounts them read-only.
	g, err := sandbox.GitProtected(r.Home, r.Workspace, s.GitAccess)
	if err != nil {
		return Policy{}, nil, err
	}
	rels = append(rels, g...)
	var existing []string
	for _, rel := range cleanRel(rels) {
		ok, err := realOrAbsent(r.Workspace, rel)
		if err != nil {
			return Policy{}, nil, err
		}
		pol.Protect = append(pol.Protect, rel)
		if ok {
			existing = append(existing, rel)
		}
	}
	return pol, existing, nil
}

// realOrAbsent reports whether the workspace-relative path rel exists,
// and fails when a component of it is a symbolic link: the profile names
// the path the link resolves to now, and the command, which writes the
// workspace, could point it elsewhere.
func realOrAbsent(ws, rel string) (bool, error) {
	cur := ws
	for _, part := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("the sandbox protects %s, but: %w", filepath.Join(ws, rel), err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return false, fmt.Errorf("%s is a symbolic link below the workspace on the way to %s, which the sandbox protects; remove it on the host", cur, filepath.Join(ws, rel))
		}
	}
	return true, nil
}

// Canon is p as the kernel reports it: its longest existing prefix with
// symbolic links resolved (on macOS /tmp, /var and /etc lead into
// /private), the rest as given. Seatbelt matches resolved paths, so a
// rule on /tmp/x would never match.
func Canon(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		if cur == "/" || cur == "." {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}
