package seatbelt

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

// testRun is a Run over a real workspace (a git repository) and conch home
// under dir, with the default sandbox settings changed by mut.
func testRun(t *testing.T, dir string, mut func(*config.SandboxSettings)) *sandbox.Run {
	t.Helper()
	ws := filepath.Join(dir, "Users/me/src/app")
	home := filepath.Join(dir, "Users/me/.conch")
	for _, d := range []string{ws, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".git")); err != nil {
		if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v: %s", err, out)
		}
	}
	s := (&config.Config{}).SandboxFor("main")
	s.Backend = "seatbelt"
	if mut != nil {
		mut(&s)
	}
	r := &sandbox.Run{Home: home, Exe: "/usr/local/bin/conch", Settings: s, Workspace: ws, HostWorkspace: ws, Cwd: ws,
		Command: "make test", Env: []string{"PATH=/usr/bin:/bin", "HOME=/home/conch", "LANG=C.UTF-8"}}
	if s.WorkspaceAccess == "none" {
		r.Workspace = filepath.Join(sandbox.ScopeDir(home, s.Scope), "workspace")
		r.Cwd = r.Workspace
		os.MkdirAll(r.Workspace, 0o700)
	}
	return r
}

// TestCommandGolden: the sandbox-exec command line and environment the
// backend builds from a run, for every workspace access × git access ×
// network × PTY, over a real repository (testdata/cmd-<setting>.txt,
// with the test's directory written $T, also where a regex holds it;
// -update rewrites them).
func TestCommandGolden(t *testing.T) {
	for _, access := range []string{"rw", "ro", "none"} {
		for _, git := range []string{"ro", "rw"} {
			for _, network := range []string{"none", "open"} {
				for _, pty := range []bool{false, true} {
					name := fmt.Sprintf("cmd-%s-git-%s-net-%s", access, git, network)
					if pty {
						name += "-pty"
					}
					t.Run(name, func(t *testing.T) {
						dir := t.TempDir()
						r := testRun(t, dir, func(s *config.SandboxSettings) {
							s.WorkspaceAccess, s.GitAccess, s.Network = access, git, network
						})
						r.PTY = pty
						b := &Seatbelt{UserHome: filepath.Join(dir, "Users/me")}
						argv, env, err := b.Command(r)
						if err != nil {
							t.Fatal(err)
						}
						var out strings.Builder
						for _, a := range argv {
							if strings.HasPrefix(a, "(version 1)") {
								out.WriteString(a + "\n;; argv\n")
								continue
							}
							fmt.Fprintf(&out, ";; %q\n", a)
						}
						out.WriteString(";; env\n")
						for _, e := range env {
							fmt.Fprintf(&out, ";; %q\n", e)
						}
						fmt.Fprintf(&out, ";; protected (checked after the run) %q\n", r.Protected)
						fmt.Fprintf(&out, ";; block fd %v; layers %v\n", r.BlockFD, b.Layers(r))
						got := strings.ReplaceAll(out.String(), regexFold(Canon(dir)), "$T")
						checkGolden(t, filepath.Join("testdata", name+".txt"), strings.ReplaceAll(got, Canon(dir), "$T"))
					})
				}
			}
		}
	}
}

// TestCommandRules: what every command line holds, whatever the
// settings: sandbox-exec by its absolute path, the profile right after
// -p, every -D a NAME=absolute path, the command last as /bin/sh -lc;
// HOME and TMPDIR the scope's; the user's home and the conch home hidden;
// with access none the agent's own workspace hidden and the private one
// writable; no protected path of a ro workspace.
func TestCommandRules(t *testing.T) {
	for _, access := range []string{"rw", "ro", "none"} {
		dir := t.TempDir()
		r := testRun(t, dir, func(s *config.SandboxSettings) { s.WorkspaceAccess = access })
		b := &Seatbelt{UserHome: filepath.Join(dir, "Users/me")}
		argv, env, err := b.Command(r)
		if err != nil {
			t.Fatal(err)
		}
		if argv[0] != "/usr/bin/sandbox-exec" || argv[1] != "-p" || !strings.HasPrefix(argv[2], "(version 1)") {
			t.Fatalf("%s: argv starts %q", access, argv[:2])
		}
		params := map[string]string{}
		i := 3
		for ; argv[i] == "-D"; i += 2 {
			k, v, ok := strings.Cut(argv[i+1], "=")
			if !ok || !filepath.IsAbs(v) {
				t.Errorf("%s: -D %q", access, argv[i+1])
			}
			params[k] = v
		}
		if !slices.Equal(argv[i:], []string{"--", "/bin/sh", "-lc", "make test"}) {
			t.Errorf("%s: argv ends %q", access, argv[i:])
		}
		scope := sandbox.ScopeDir(r.Home, r.Settings.Scope)
		if !slices.Contains(env, "HOME="+filepath.Join(scope, "home")) || !slices.Contains(env, "TMPDIR="+filepath.Join(scope, "tmp")) || slices.Contains(env, "HOME=/home/conch") {
			t.Errorf("%s: env %q", access, env)
		}
		if params["HOME"] != filepath.Join(dir, "Users/me") || params["CONCH_HOME"] != r.Home {
			t.Errorf("%s: hidden %q %q", access, params["HOME"], params["CONCH_HOME"])
		}
		if params["WORKSPACE"] != r.Workspace {
			t.Errorf("%s: workspace %q, want %q", access, params["WORKSPACE"], r.Workspace)
		}
		if (access == "none") != (params["HIDDEN_0"] == r.HostWorkspace) {
			t.Errorf("%s: HIDDEN_0 %q", access, params["HIDDEN_0"])
		}
		writable := strings.Contains(argv[2], `(allow file-read* file-write* (subpath (param "WORKSPACE")))`)
		if writable != (access != "ro") {
			t.Errorf("%s: workspace writable %v", access, writable)
		}
		_, protect := params["PROTECT_0"]
		if protect != (access != "ro") || (access == "rw") != (len(r.Protected) > 0) {
			t.Errorf("%s: protected paths %v, %q", access, protect, r.Protected)
		}
	}
}

// TestCommandProtectsTheRepository: the shared git logic decides what is
// protected (sandbox.GitProtected, as bwrap mounts it): with gitAccess
// ro the whole .git, with rw its members (config, hooks, …), and the
// protectPaths, absent ones too (.conch); a symbolic link on the way to
// a protected path fails the run.
func TestCommandProtectsTheRepository(t *testing.T) {
	for _, git := range []string{"ro", "rw"} {
		dir := t.TempDir()
		r := testRun(t, dir, func(s *config.SandboxSettings) { s.GitAccess = git })
		pol, existing, err := (&Seatbelt{UserHome: dir}).policy(r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := sandbox.GitProtected(r.Home, r.Workspace, git)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range append(want, ".conch", ".git/hooks", ".git/config") {
			if !slices.Contains(pol.Protect, p) {
				t.Errorf("git %s: %s not protected: %q", git, p, pol.Protect)
			}
		}
		if slices.Contains(existing, ".conch") || !slices.Contains(existing, ".git/hooks") {
			t.Errorf("git %s: checked after the run %q", git, existing)
		}
	}
	dir := t.TempDir()
	r := testRun(t, dir, func(s *config.SandboxSettings) { s.ProtectPaths = []string{"link/x"} })
	os.Mkdir(filepath.Join(dir, "elsewhere"), 0o700)
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(r.Workspace, "link")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (&Seatbelt{UserHome: dir}).Command(r); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a link on the way to a protected path: %v", err)
	}
}

// TestCommandRefuses: a bind that would open the boundary, and an
// unknown network setting, are errors, never a command line.
func TestCommandRefuses(t *testing.T) {
	for name, mut := range map[string]func(*config.SandboxSettings){
		"bind /":       func(s *config.SandboxSettings) { s.Binds = []string{"/"} },
		"ro bind /etc": func(s *config.SandboxSettings) { s.ROBinds = []string{"/etc"} },
		"network":      func(s *config.SandboxSettings) { s.Network = "loopback" },
	} {
		dir := t.TempDir()
		if _, _, err := (&Seatbelt{UserHome: dir}).Command(testRun(t, dir, mut)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestCanon: symbolic links of the existing part of a path are resolved,
// the missing rest is kept (a protected path absent at the start).
func TestCanon(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "private", "tmp")
	os.MkdirAll(real, 0o700)
	os.Symlink(real, filepath.Join(dir, "tmp"))
	for in, want := range map[string]string{
		filepath.Join(dir, "tmp"):                   real,
		filepath.Join(dir, "tmp", "a", "b"):         filepath.Join(real, "a", "b"),
		filepath.Join(dir, "tmp", "..", "tmp", "c"): filepath.Join(real, "c"),
		filepath.Join(dir, "none", "x"):             filepath.Join(Canon(dir), "none", "x"),
		"/":                                         "/",
	} {
		if got := Canon(in); got != want {
			t.Errorf("Canon(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestAvailable: the backend is usable when sandbox-exec is an executable
// file, and says why not otherwise (here, on Linux, the real one is
// missing).
func TestAvailable(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "sandbox-exec")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o644)
	if err := (&Seatbelt{Exec: exe}).Available(context.Background()); err != nil {
		t.Errorf("an executable: %v", err)
	}
	for _, p := range []string{plain, filepath.Join(dir, "missing"), dir} {
		if err := (&Seatbelt{Exec: p}).Available(context.Background()); err == nil {
			t.Errorf("%s: available", p)
		}
	}
	if _, err := os.Stat(SandboxExec); err != nil {
		if (&Seatbelt{}).Available(context.Background()) == nil {
			t.Error("available without sandbox-exec")
		}
	}
}
