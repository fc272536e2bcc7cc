//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// hostGit runs git on the host the way a user would, with a clean global
// configuration.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@x",
		"GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@x", "GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=file")
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// gitAttack is one way a sandboxed command can leave code that the
// host's git runs later: setup prepares the repository on the host, cmd
// runs in the sandbox (in the repository; $M is the payload command, $E
// a directory of the workspace the command may use), check is the host
// git command (in the repository, or in sub if set). blockedRW says
// whether sandbox.gitAccess "rw" blocks it too.
type gitAttack struct {
	name, setup, cmd, sub string
	prep                  string // run in the sandbox, in the repository, in a run of its own before cmd
	check                 []string
	blockedRW             bool
}

var gitAttacks = []gitAttack{
	{name: "config", cmd: `git config core.fsmonitor "$M"`, check: []string{"status"}, blockedRW: true},
	{name: "hooks", cmd: `printf '#!/bin/sh\n%s\n' "$M" > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit`, check: []string{"commit", "--allow-empty", "-qm", "x"}, blockedRW: true},
	{name: "hooks-absent", setup: "rm -rf .git/hooks", cmd: `mkdir -p .git/hooks; printf '#!/bin/sh\n%s\n' "$M" > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit`, check: []string{"commit", "--allow-empty", "-qm", "x"}, blockedRW: true},
	{name: "commondir-fsmonitor", cmd: `mkdir -p $E/objects $E/refs; printf '[core]\n\tfsmonitor = "%s"\n' "$M" > $E/config; echo $E > .git/commondir`, check: []string{"status"}},
	{name: "commondir-hooks", cmd: `mkdir -p $E/objects $E/refs $E/hooks; printf '#!/bin/sh\n%s\n' "$M" > $E/hooks/pre-commit; chmod +x $E/hooks/pre-commit; echo $E > .git/commondir`, check: []string{"commit", "--allow-empty", "-qm", "x"}},
	{name: "config.worktree", setup: "git config core.repositoryformatversion 1 && git config extensions.worktreeConfig true",
		cmd: `printf '[core]\n\tfsmonitor = "%s"\n' "$M" > .git/config.worktree`, check: []string{"status"}, blockedRW: true},
	{name: "info-attributes", setup: "mkdir -p .git/info", cmd: `echo '* diff=x filter=x' > .git/info/attributes; git config diff.x.command "$M" 2>/dev/null; true`, check: []string{"diff", "HEAD"}, blockedRW: true},
	{name: "gitlink-nested-repo", cmd: `git init -q sub && git -C sub -c user.name=a -c user.email=a@b commit -q --allow-empty -m s && git -C sub config core.fsmonitor "$M" && git add sub`, check: []string{"status"}},
	{name: "submodule-config", setup: "submodule", cmd: `git config -f .git/modules/sub/config core.fsmonitor "$M"`, check: []string{"status"}, blockedRW: true},
	{name: "submodule-gitfile", setup: "submodule", cmd: `git init -q $E.w && mv $E.w/.git $E && git config -f $E/config core.fsmonitor "$M" && echo "gitdir: $E" > sub/.git`, check: []string{"status"}, blockedRW: true},
	{name: "gitmodules-update-command", setup: "submodule", cmd: `git config -f .gitmodules submodule.sub.update "!$M"`, check: []string{"-c", "protocol.file.allow=always", "submodule", "update", "--remote"}, blockedRW: true},
	{name: "worktree-commondir", setup: "git worktree add -q wt", cmd: `mkdir -p $E/objects $E/refs; printf '[core]\n\tfsmonitor = "%s"\n' "$M" > $E/config; echo $E > .git/worktrees/wt/commondir`, sub: "wt", check: []string{"status"}, blockedRW: true},
	{name: "worktree-gitfile", setup: "git worktree add -q wt", cmd: `git init -q $E.w && mv $E.w/.git $E && git config -f $E/config core.fsmonitor "$M" && echo "gitdir: $E" > wt/.git`, sub: "wt", check: []string{"status"}, blockedRW: true},
	{name: "nested-repo-untracked", cmd: `git init -q sub && git -C sub config core.fsmonitor "$M" && git -C sub config core.pager "$M"`, check: []string{"status"}, blockedRW: true},
	// core.hooksPath naming a directory of the worktree (husky sets
	// .husky/_): the hooks live among the files the command writes.
	{name: "hookspath", setup: "git config core.hooksPath .githooks && mkdir .githooks", cmd: `printf '#!/bin/sh\n%s\n' "$M" > .githooks/pre-commit; chmod +x .githooks/pre-commit`, check: []string{"commit", "--allow-empty", "-qm", "x"}, blockedRW: true},
	{name: "hookspath-absent", setup: "git config core.hooksPath .husky/_", cmd: `mkdir -p .husky/_; printf '#!/bin/sh\n%s\n' "$M" > .husky/_/pre-commit; chmod +x .husky/_/pre-commit`, check: []string{"commit", "--allow-empty", "-qm", "x"}, blockedRW: true},
	// include.path naming a file of the worktree (a configuration the
	// project shares): git reads it as the repository's own.
	{name: "include-path", setup: "touch .gitconfig-shared && git config include.path ../.gitconfig-shared", cmd: `printf '[core]\n\tfsmonitor = "%s"\n' "$M" > .gitconfig-shared`, check: []string{"status"}, blockedRW: true},
	{name: "include-path-absent", setup: `git config 'includeIf.gitdir:/.path' ../shared/git.conf`, cmd: `mkdir -p shared; printf '[core]\n\tfsmonitor = "%s"\n' "$M" > shared/git.conf`, check: []string{"status"}, blockedRW: true},
	// Directories that sort before .git, more than the repository
	// search looks at, made in a first run: the next run's search must
	// still find the repository.
	{name: "search-budget", prep: `for i in $(seq 0 5100); do echo "!$i"; done | xargs mkdir`, cmd: `mkdir -p $E/objects $E/refs; printf '[core]\n\tfsmonitor = "%s"\n' "$M" > $E/config; echo $E > .git/commondir`, check: []string{"status"}},
	{name: "nested-repo-config", setup: "git init -q lib", cmd: `git -C lib config core.fsmonitor "$M"`, sub: "lib", check: []string{"status"}, blockedRW: true},
}

// TestSandboxGitCannotPlantHostCode: nothing a sandboxed command does to
// the workspace's repositories makes the host's git run its code. Every
// member of gitAttacks runs in a repository of its own; the payload
// would create a marker outside the workspace, where the sandbox cannot
// write, so a marker means the host ran it. With sandbox.gitAccess "rw"
// the members marked blockedRW are still blocked, and git's writes work
// inside.
func TestSandboxGitCannotPlantHostCode(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	// "ro/root": as root, runAs 0:0 runs bwrap without the staged
	// mounts (the argv a gateway that is not root uses).
	for _, mode := range []string{"ro", "rw", "ro/root"} {
		access := strings.TrimSuffix(mode, "/root")
		conf := map[string]any{"gitAccess": access}
		if mode == "ro/root" {
			if os.Geteuid() != 0 {
				continue
			}
			conf["runAs"] = "0:0"
		}
		se := newSandbox(t, conf)
		markers := filepath.Join(filepath.Dir(se.ws), "markers-"+access)
		access = mode
		os.MkdirAll(markers, 0o755)
		subsrc := filepath.Join(filepath.Dir(se.ws), "subsrc")
		if _, err := os.Stat(subsrc); err != nil {
			hostGit(t, filepath.Dir(se.ws), "init", "-q", subsrc)
			hostGit(t, subsrc, "commit", "-q", "--allow-empty", "-m", "s")
		}
		for _, a := range gitAttacks {
			repo := filepath.Join(se.ws, a.name)
			hostGit(t, se.ws, "init", "-q", repo)
			hostGit(t, repo, "commit", "-q", "--allow-empty", "-m", "init")
			switch a.setup {
			case "":
			case "submodule":
				hostGit(t, repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", subsrc, "sub")
				hostGit(t, repo, "commit", "-qm", "sub")
			default:
				if out, err := exec.Command("sh", "-c", "cd "+repo+" && "+a.setup).CombinedOutput(); err != nil {
					t.Fatalf("%s: setup: %v %s", a.name, err, out)
				}
			}
			if want := map[string]string{"submodule": "sub/.git", "git worktree add -q wt": "wt/.git", "git init -q lib": "lib/.git/HEAD"}[a.setup]; want != "" {
				if _, err := os.Stat(filepath.Join(repo, want)); err != nil {
					t.Fatalf("%s: setup made no %s: %v", a.name, want, err)
				}
			}
			marker := filepath.Join(markers, a.name)
			env := map[string]any{"M": "touch " + marker + "; false", "E": filepath.Join(se.ws, "evil-"+a.name)}
			if a.prep != "" {
				if r := se.c.Exec(map[string]any{"command": a.prep + " && echo prepared", "workdir": repo, "env": env}); !strings.Contains(r.Text, "prepared") {
					t.Fatalf("%s: prep: %s", a.name, r.Text)
				}
			}
			r := se.c.Exec(map[string]any{"command": a.cmd + " 2>&1; true", "workdir": repo, "env": env})
			if r.Str("host") != "sandbox" {
				t.Fatalf("%s: not sandboxed: %s %v", a.name, r.Text, r.D)
			}
			dir := repo
			if a.sub != "" {
				dir = filepath.Join(repo, a.sub)
			}
			out := hostGit(t, dir, a.check...)
			_, err := os.Stat(marker)
			ran := err == nil
			blocked := access != "rw" || a.blockedRW
			switch {
			case blocked && ran:
				t.Errorf("gitAccess %s, %s: the host's git ran the sandbox's code\nsandbox: %s\nhost git %v: %s", access, a.name, r.Text, a.check, out)
			case !blocked && !ran:
				t.Logf("gitAccess %s, %s: not run on the host this time (documented as open)", access, a.name)
			default:
				t.Logf("gitAccess %s, %s: ran on the host=%v\nsandbox: %s", access, a.name, ran, r.Text)
			}
		}
	}
}

// TestSandboxGitInside: with the default gitAccess "ro", git reads work
// inside and writes fail with a read-only error; with "rw" add, commit,
// branch, checkout and stash work and reach the host's repository.
func TestSandboxGitInside(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	id := "-c user.name=a -c user.email=a@b"
	for _, access := range []string{"ro", "rw"} {
		se := newSandbox(t, map[string]any{"gitAccess": access})
		hostGit(t, se.ws, "init", "-q", "-b", "main")
		os.WriteFile(filepath.Join(se.ws, "a.txt"), []byte("one\n"), 0o644)
		hostGit(t, se.ws, "add", "a.txt")
		hostGit(t, se.ws, "commit", "-qm", "init")
		r := se.c.Exec(map[string]any{"command": "echo two >> a.txt; git status --short; git log --oneline | wc -l; git diff --stat"})
		if !strings.Contains(r.Text, " M a.txt") || !strings.Contains(r.Text, "1 file changed") {
			t.Fatalf("gitAccess %s: git reads inside: %s", access, r.Text)
		}
		r = se.c.Exec(map[string]any{"command": "git " + id + " commit -qam two 2>&1; echo rc=$?"})
		if access == "ro" {
			if !strings.Contains(r.Text, "Read-only file system") || strings.Contains(r.Text, "rc=0") {
				t.Fatalf("gitAccess ro: commit inside: %s", r.Text)
			}
			if n := strings.Count(hostGit(t, se.ws, "log", "--oneline"), "\n"); n != 1 {
				t.Fatalf("gitAccess ro: the host's history changed: %d commits", n)
			}
			continue
		}
		if !strings.Contains(r.Text, "rc=0") {
			t.Fatalf("gitAccess rw: commit inside: %s", r.Text)
		}
		r = se.c.Exec(map[string]any{"command": "git branch side && git checkout -q side && echo three >> a.txt && git stash -q && git stash list | wc -l && git checkout -q main && git " + id + " stash pop -q 2>&1; git status --short; echo rc=$?"})
		if !strings.Contains(r.Text, "rc=0") || !strings.Contains(r.Text, "M a.txt") {
			t.Fatalf("gitAccess rw: branch, checkout, stash inside: %s", r.Text)
		}
		if log := hostGit(t, se.ws, "log", "--oneline", "main"); !strings.Contains(log, "two") {
			t.Fatalf("gitAccess rw: the commit did not reach the host: %s", log)
		}
		if b := hostGit(t, se.ws, "branch", "--list", "side"); !strings.Contains(b, "side") {
			t.Fatalf("gitAccess rw: branch: %s", b)
		}
	}
}

// TestSandboxRunsAsUnprivilegedUser: a gateway running as root runs
// bwrap's commands as sandbox.runAs (65534 by default): root-only files
// stay closed, the workspace and HOME stay writable, and what the command
// writes belongs to the gateway's user on the host. runAs "0:0" keeps
// the old behaviour.
func TestSandboxRunsAsUnprivilegedUser(t *testing.T) {
	needBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the mapping applies to a gateway running as root")
	}
	t.Parallel()
	secret := "/etc/shadow"
	if fi, err := os.Stat(secret); err != nil || fi.Mode().Perm()&0o004 != 0 {
		t.Skipf("%s is missing or world-readable here", secret)
	}
	se := newSandbox(t, nil)
	r := se.c.Exec(map[string]any{"command": "id -u; id -g; cat " + secret + " 2>&1 | head -c 200; echo; echo w > w.txt && echo ws-ok; echo h > $HOME/h && echo home-ok; mkdir -p d/e && echo dir-ok; ls -ln w.txt"})
	t.Log(r.Text)
	sb, _ := r.D["sandbox"].(map[string]any)
	lines := strings.Split(r.Text, "\n")
	if len(lines) < 2 || lines[0] != "65534" || lines[1] != "65534" || !strings.Contains(fmt.Sprint(sb["layers"]), "uid-65534") {
		t.Fatalf("not running as 65534: %s %v", r.Text, sb["layers"])
	}
	if !strings.Contains(r.Text, "Permission denied") || strings.Contains(r.Text, "root:") {
		t.Fatalf("%s is readable inside: %s", secret, r.Text)
	}
	for _, w := range []string{"ws-ok", "home-ok", "dir-ok"} {
		if !strings.Contains(r.Text, w) {
			t.Fatalf("%s missing: %s", w, r.Text)
		}
	}
	fi, err := os.Stat(filepath.Join(se.ws, "w.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
		t.Fatalf("the file the command wrote belongs to %d:%d on the host, want 0:0", st.Uid, st.Gid)
	}
	// PTY runs and wait probes work under the mapping too.
	if p := se.c.Exec(map[string]any{"command": "test -t 0 && id -u", "pty": true}); !strings.Contains(p.Text, "65534") {
		t.Fatalf("pty: %s", p.Text)
	}
	// A workspace of another owner: its files appear as the runAs
	// user's, and what the command writes lands owned by that owner.
	other := newSandbox(t, nil)
	os.WriteFile(filepath.Join(other.ws, "theirs.txt"), []byte("x\n"), 0o644)
	for _, p := range []string{other.ws, filepath.Join(other.ws, "theirs.txt")} {
		if err := os.Chown(p, 4321, 4322); err != nil {
			t.Fatal(err)
		}
	}
	if r := other.c.Exec(map[string]any{"command": "echo y >> theirs.txt && echo n > new.txt && echo other-ok"}); !strings.Contains(r.Text, "other-ok") {
		t.Fatalf("workspace owned by 4321: %s", r.Text)
	}
	if fi, err := os.Stat(filepath.Join(other.ws, "new.txt")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 4321 || fi.Sys().(*syscall.Stat_t).Gid != 4322 {
		t.Fatalf("new.txt in a workspace owned by 4321:4322: %v %v", err, fi)
	}
	root := newSandbox(t, map[string]any{"runAs": "0:0"})
	if r := root.c.Exec(map[string]any{"command": "id -u; head -c 5 " + secret}); !strings.HasPrefix(r.Text, "0\nroot:") {
		t.Fatalf("runAs 0:0: %s", r.Text)
	}
	// The landlock backend keeps root (host paths) but grants only what
	// every user may read of /etc.
	if abi, _, errno := syscall.Syscall(444 /* landlock_create_ruleset */, 0, 0, 1); errno == 0 && abi > 0 {
		ll := newSandbox(t, map[string]any{"backend": "landlock"})
		r := ll.c.Exec(map[string]any{"command": "id -u; cat " + secret + " 2>&1 | head -c 200; echo; head -c 5 /etc/passwd; echo; ls /etc | grep -c . ; echo w > w.txt && echo ws-ok"})
		t.Log(r.Text)
		if strings.Contains(r.Text, "root:$") || strings.Contains(r.Text, "root:*") || !strings.Contains(r.Text, "Permission denied") ||
			!strings.Contains(r.Text, "root:") || !strings.Contains(r.Text, "ws-ok") {
			t.Fatalf("landlock as root: %s", r.Text)
		}
	}
}

// TestSandboxSeccomp: every system call of the bwrap and landlock
// filters fails inside the sandbox, each tried for real by the conch
// binary inside (`sandbox-init --probe syscall NAME`), and the tools an
// agent would use for a nested user namespace fail.
func TestSandboxSeccomp(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	want := map[string]string{"clone": "EPERM", "clone3": "ENOSYS", "getpid": "ok"}
	for _, s := range sandbox.DeniedSyscalls {
		want[s] = "EPERM"
	}
	var names []string
	for s := range want {
		names = append(names, s)
	}
	backends := []string{"bwrap"}
	if abi, _, errno := syscall.Syscall(444 /* landlock_create_ruleset */, 0, 0, 1); errno == 0 && abi > 0 {
		backends = append(backends, "landlock")
	}
	for _, b := range backends {
		se := newSandbox(t, map[string]any{"backend": b})
		exe := sandbox.InsideExe
		if b == "landlock" {
			// Landlock grants execution in the workspace, not where the
			// test binary was built.
			exe = filepath.Join(se.ws, "conch")
			if data, err := os.ReadFile(e2etest.ConchBin); err != nil || os.WriteFile(exe, data, 0o755) != nil {
				t.Fatalf("copy conch: %v", err)
			}
		}
		r := se.c.Exec(map[string]any{"command": fmt.Sprintf("for s in %s; do echo \"$s $(%s sandbox-init --probe syscall $s)\"; done; unshare -U true 2>&1; echo unshare=$?; unshare -r id 2>&1; echo unshare-r=$?",
			strings.Join(names, " "), exe)})
		got := map[string]string{}
		for _, l := range strings.Split(r.Text, "\n") {
			if k, v, ok := strings.Cut(l, " "); ok {
				got[k] = v
			}
		}
		for _, s := range names {
			if got[s] != want[s] && !(got[s] == "unknown" && want[s] == "EPERM") {
				t.Errorf("%s: %s inside: %q, want %s", b, s, got[s], want[s])
			}
		}
		if strings.Contains(r.Text, "unshare=0") || strings.Contains(r.Text, "unshare-r=0") {
			t.Errorf("%s: a nested user namespace was made: %s", b, r.Text)
		}
		t.Logf("%s:\n%s", b, r.Text)
	}
}

// TestSandboxApplyPatchGit: apply_patch for a sandboxed agent writes the
// host side of the workspace as conch's user, so it must refuse the git
// paths the sandbox mounts read-only (a .git/commondir from a patch is
// the same attack as one from a command).
func TestSandboxApplyPatchGit(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	for _, access := range []string{"ro", "rw"} {
		se := newSandbox(t, map[string]any{"gitAccess": access})
		se.c.Close()
		conf, _ := os.ReadFile(filepath.Join(se.home, "config.json"))
		var m map[string]any
		json.Unmarshal(conf, &m)
		m["tools"] = map[string]any{"exec": map[string]any{"applyPatch": map[string]any{"enabled": true}}}
		b, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(se.home, "config.json"), b, 0o600)
		hostGit(t, se.ws, "init", "-q")
		hostGit(t, se.ws, "init", "-q", "lib")
		c := e2etest.StartConchEnv(t, se.home, []string{"HOME=" + se.userHome})
		os.Symlink(".git", filepath.Join(se.ws, "lnk"))
		os.Symlink(filepath.Join(se.ws, ".git", "hooks"), filepath.Join(se.ws, "hk"))
		// The same files by other names: ./, .., absolute, through links.
		paths := []string{".git/config", ".git/hooks/pre-commit", "lib/.git/config", ".git/./config", "x/../.git/config", "./.git/hooks/post-checkout",
			filepath.Join(se.ws, ".git", "config"), "lnk/config", "hk/pre-push", "lib/../.git/hooks/x", ".git//config"}
		if access == "ro" {
			paths = append(paths, ".git/commondir", ".git/index", "lib/.git/commondir")
		}
		for _, p := range paths {
			r := c.Call("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: " + p + "\n+x\n*** End Patch"})
			if !r.IsError || !strings.Contains(r.Text, "protected") {
				t.Errorf("gitAccess %s: apply_patch wrote %s: %s", access, p, r.Text)
			}
		}
		if r := c.Call("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: ok.txt\n+x\n*** End Patch"}); r.IsError {
			t.Fatalf("gitAccess %s: apply_patch outside git: %s", access, r.Text)
		}
	}
}

// TestSandboxLinksDoNotBindHostDirs: a command leaves symbolic links in
// the workspace on the way to the paths the next run mounts read-only (a
// .git file whose gitdir goes through link -> .., a .git/commondir ->
// ../.. with gitAccess "rw"). bwrap follows links in a bind's source and
// destination, so the next run would see (and, for the directories bound
// above a protected path, write) the host's directory the links reach:
// here the user's ~/.ssh beside the workspace. The next run must fail or
// see nothing of it. runAs 0:0 is the argv of a gateway that is not root.
func TestSandboxLinksDoNotBindHostDirs(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	confs := []map[string]any{{"gitAccess": "ro"}, {"gitAccess": "rw"}}
	if os.Geteuid() == 0 {
		confs = append(confs, map[string]any{"gitAccess": "ro", "runAs": "0:0"}, map[string]any{"gitAccess": "rw", "runAs": "0:0"})
	}
	for _, conf := range confs {
		se := newSandbox(t, conf)
		hostGit(t, se.ws, "init", "-q")
		uh := se.userHome
		r := se.c.Exec(map[string]any{"command": `ln -s .. link; mkdir sub; echo "gitdir: ../link/user/.ssh" > sub/.git; ln -s ../.. .git/commondir 2>&1; echo planted`})
		if !strings.Contains(r.Text, "planted") {
			t.Fatalf("%v: plant: %s", conf, r.Text)
		}
		r = se.c.Exec(map[string]any{"command": fmt.Sprintf("cat %s/.ssh/id_ed25519 2>&1; touch %s/pwned 2>&1; echo ran", uh, uh)})
		t.Logf("%v: %s", conf, r.Text)
		if strings.Contains(r.Text, "SECRET-KEY-930") {
			t.Errorf("%v: the next run read the host's ~/.ssh through the links: %s", conf, r.Text)
		}
		if _, err := os.Stat(filepath.Join(uh, "pwned")); err == nil {
			t.Errorf("%v: the next run wrote the host's home through the links", conf)
		}
		// Either refused, naming the link (a link where a protected path
		// was), or run without the host directory (a .git file whose
		// gitdir leads out of the workspace protects nothing inside).
		if !strings.Contains(r.Text, "symbolic link") && !strings.Contains(r.Text, "ran") {
			t.Errorf("%v: neither refused nor run: %s", conf, r.Text)
		}
	}
}

// TestSandboxLinkSwapRace: a background command of an earlier run keeps
// swapping a directory the next run binds (the directory above a git
// directory a .git file names) with a link to the workspace's parent
// (renameat2 RENAME_EXCHANGE in a loop). conch's check of the path and
// bwrap's mount are apart in time, so without more a run would now and
// then get the host's directory mounted; with bwrap's binds made from
// descriptors opened without following links, no run sees anything of
// the workspace's parent but the workspace itself.
func TestSandboxLinkSwapRace(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	t.Parallel()
	confs := []map[string]any{{}}
	if os.Geteuid() == 0 {
		confs = append(confs, map[string]any{"runAs": "0:0"})
	}
	swap := `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
open("started", "w").close()
while True:
    libc.renameat2(-100, b"real", -100, b"alt", 2)
`
	for _, conf := range confs {
		se := newSandbox(t, conf)
		parent := filepath.Dir(se.ws)
		r := se.c.Exec(map[string]any{"command": "mkdir -p real/ws sub && echo 'gitdir: ../real/ws' > sub/.git && ln -s .. alt && exec python3 -c \"$SWAP\"",
			"background": true, "env": map[string]any{"SWAP": swap}})
		id := r.Str("sessionId")
		if id == "" {
			t.Fatalf("%v: background: %s", conf, r.Text)
		}
		e2etest.Eventually(t, 20*time.Second, func() string {
			if _, err := os.Stat(filepath.Join(se.ws, "started")); err != nil {
				return "the swapper has not started"
			}
			return ""
		})
		ran, refused := 0, 0
		for i := 0; i < 40 && (ran < 15 || refused == 0); i++ {
			r := se.c.Exec(map[string]any{"command": fmt.Sprintf("echo ls:$(ls -A %s | tr '\\n' ' '); cat %s/.ssh/id_ed25519 2>/dev/null; echo ran", parent, se.userHome)})
			switch {
			case strings.Contains(r.Text, "SECRET-KEY-930") || (strings.HasPrefix(r.Text, "ls:") && !strings.HasPrefix(r.Text, "ls:ws\n")):
				t.Fatalf("%v: run %d saw the workspace's parent: %q", conf, i, r.Text)
			case strings.Contains(r.Text, "ran"):
				ran++
			default:
				refused++
			}
		}
		se.c.Process(map[string]any{"action": "kill", "sessionId": id})
		se.c.WaitEnd(id, 15*time.Second)
		t.Logf("%v: %d runs ran, %d refused", conf, ran, refused)
		if ran == 0 {
			t.Fatalf("%v: no run ran while the swapper ran", conf)
		}
	}
}

// TestSandboxBindIntoWorkspace: a configured bind whose destination lies
// in the workspace is not taken for a swapped link by the mount check.
func TestSandboxBindIntoWorkspace(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	// Below /tmp itself: the runAs user of a root gateway must reach it.
	data, err := os.MkdirTemp("", "conch-bind-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	os.Chmod(data, 0o755)
	os.WriteFile(filepath.Join(data, "d.txt"), []byte("DATA-77\n"), 0o644)
	se := newSandbox(t, nil)
	se.c.Close()
	conf, _ := os.ReadFile(filepath.Join(se.home, "config.json"))
	var m map[string]any
	json.Unmarshal(conf, &m)
	m["sandbox"].(map[string]any)["bwrap"] = map[string]any{"binds": []string{data + ":" + filepath.Join(se.ws, "data")}}
	b, _ := json.Marshal(m)
	os.WriteFile(filepath.Join(se.home, "config.json"), b, 0o600)
	hostGit(t, se.ws, "init", "-q")
	c := e2etest.StartConchEnv(t, se.home, []string{"HOME=" + se.userHome})
	if r := c.Exec(map[string]any{"command": "cat data/d.txt && echo w > x && echo ok"}); !strings.Contains(r.Text, "DATA-77") || !strings.Contains(r.Text, "ok") {
		t.Fatalf("bind into the workspace: %s", r.Text)
	}
}
