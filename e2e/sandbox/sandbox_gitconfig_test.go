//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// gitKeyAttack is a key of git's configuration whose value names a
// workspace path the host's git runs: attack writes that path inside the
// sandbox ($MARK is the marker the payload makes), benign is what the
// user had there when it exists at the start.
type gitKeyAttack struct {
	name, key, value, target string
	dir                      bool   // the target is a directory (a hooks directory)
	benign                   string // the user's own program at target ("exists")
}

var gitKeyAttacks = []gitKeyAttack{
	{name: "hooksPath", key: "core.hooksPath", value: ".githooks", target: ".githooks/pre-commit", dir: true},
	{name: "fsmonitor", key: "core.fsmonitor", value: "./tools/fsmonitor", target: "tools/fsmonitor", benign: "#!/bin/sh\nexit 1\n"},
	{name: "textconv", key: "diff.t.textconv", value: "./tools/textconv", target: "tools/textconv", benign: "#!/bin/sh\ncat \"$1\"\n"},
	{name: "clean-filter", key: "filter.f.clean", value: "./tools/clean", target: "tools/clean", benign: "#!/bin/sh\ncat\n"},
	{name: "sshCommand", key: "core.sshCommand", value: "./tools/ssh", target: "tools/ssh", benign: "#!/bin/sh\nexit 1\n"},
}

// gitConfSource is where the keys are set for the e2e test: in a file
// (file names it, relative to the repository or absolute; include says
// how the repository's config reaches it), or through the environment.
type gitConfSource struct {
	name    string
	file    string                  // "" for GIT_CONFIG_COUNT
	include string                  // the repository's config key that names file ("" for none)
	env     func(f string) []string // the gateway's and the host git's environment
	inWS    bool                    // file lies in the repository (the command can try to rewrite it)
	missing bool                    // file does not exist at the start (an include whose target comes later)
}

// TestSandboxGitConfigIndirection: every source of git configuration
// (the repository's config, a file include.path or includeIf of each
// kind names, $GIT_CONFIG_GLOBAL in and out of the workspace,
// $GIT_CONFIG_SYSTEM, $XDG_CONFIG_HOME, ~/.gitconfig,
// $GIT_CONFIG_COUNT) × every key class the host's git runs from the
// workspace (hooks directory, fsmonitor, textconv, clean filter,
// sshCommand) × the target existing or not, with gitAccess ro and rw.
// The sandboxed command writes a payload to each target (and rewrites
// the configuration file when it is in the workspace); then the host's
// real git runs what would run it (status, diff, add, commit, ls-remote,
// a branch switch and a new remote for the includeIf conditions). No
// payload may run.
func TestSandboxGitConfigIndirection(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	global := func(name string) func(string) []string {
		return func(f string) []string { return []string{name + "=" + f} }
	}
	sources := []gitConfSource{
		{name: "local", file: ".git/config"},
		{name: "include.path", file: "shared.gitconfig", include: "include.path", inWS: true},
		{name: "includeIf-gitdir", file: "shared.gitconfig", include: "includeIf.gitdir:REPO/.path", inWS: true},
		{name: "includeIf-onbranch", file: "shared.gitconfig", include: "includeIf.onbranch:feature.path", inWS: true},
		{name: "includeIf-onbranch-missing", file: "later.gitconfig", include: "includeIf.onbranch:feature.path", inWS: true, missing: true},
		{name: "includeIf-hasconfig", file: "shared.gitconfig", include: "includeIf.hasconfig:remote.*.url:https://example.invalid/**.path", inWS: true},
		{name: "GIT_CONFIG_GLOBAL", file: "/global.gitconfig", env: global("GIT_CONFIG_GLOBAL")},
		{name: "GIT_CONFIG_GLOBAL-in-workspace", file: "/WS/global.gitconfig", env: global("GIT_CONFIG_GLOBAL"), inWS: true},
		{name: "GIT_CONFIG_SYSTEM", file: "/system.gitconfig", env: func(f string) []string { return []string{"GIT_CONFIG_SYSTEM=" + f, "GIT_CONFIG_NOSYSTEM="} }},
		{name: "XDG_CONFIG_HOME", file: "/xdg/git/config", env: func(f string) []string { return []string{"XDG_CONFIG_HOME=" + filepath.Dir(filepath.Dir(f))} }},
		{name: "HOME/.gitconfig", file: "/HOME/.gitconfig", env: func(string) []string { return nil }},
		{name: "GIT_CONFIG_COUNT", env: func(string) []string {
			e := []string{fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(gitKeyAttacks))}
			for i, a := range gitKeyAttacks {
				e = append(e, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, a.key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, a.value))
			}
			return e
		}},
	}
	for _, access := range []string{"ro", "rw"} {
		for _, src := range sources {
			t.Run(access+"/"+src.name, func(t *testing.T) { gitConfigIndirection(t, access, src) })
		}
	}
}

func gitConfigIndirection(t *testing.T, access string, src gitConfSource) {
	root := t.TempDir()
	ws, userHome, outside, markers := filepath.Join(root, "ws"), filepath.Join(root, "user"), filepath.Join(root, "outside"), filepath.Join(root, "markers")
	for _, d := range []string{ws, userHome, outside, markers} {
		os.MkdirAll(d, 0o755)
	}
	// The one file of a source for every repository: outside the
	// workspace, in the user's home (/HOME/) or at the top of the
	// workspace (/WS/).
	outFile := ""
	if src.file != "" && strings.HasPrefix(src.file, "/") {
		outFile = filepath.Join(outside, src.file)
		if p, ok := strings.CutPrefix(src.file, "/HOME/"); ok {
			outFile = filepath.Join(userHome, p)
		}
		if p, ok := strings.CutPrefix(src.file, "/WS/"); ok {
			outFile = filepath.Join(ws, p)
		}
	}
	base := []string{"HOME=" + userHome, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@x", "GIT_COMMITTER_NAME=u",
		"GIT_COMMITTER_EMAIL=u@x", "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_GLOBAL=", "XDG_CONFIG_HOME=", "GIT_CONFIG_COUNT="}
	run := func(dir string, env []string, name string, args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, append(append(os.Environ(), base...), env...)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	// One repository per key and state, made with the plain
	// configuration: what git runs is set afterwards.
	type repo struct {
		dir    string
		attack gitKeyAttack
		exists bool
	}
	var repos []repo
	for _, a := range gitKeyAttacks {
		for _, exists := range []bool{false, true} {
			dir := filepath.Join(ws, fmt.Sprintf("%s-%v", a.name, map[bool]string{false: "missing", true: "exists"}[exists]))
			run(ws, nil, "git", "init", "-q", "-b", "main", dir)
			os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644)
			os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("*.txt diff=t\n*.dat filter=f\n"), 0o644)
			run(dir, nil, "git", "add", ".")
			run(dir, nil, "git", "commit", "-qm", "init")
			if exists {
				p := filepath.Join(dir, a.target)
				if a.dir {
					os.MkdirAll(filepath.Dir(p), 0o755)
				} else {
					os.MkdirAll(filepath.Dir(p), 0o755)
					os.WriteFile(p, []byte(a.benign), 0o755)
				}
			}
			repos = append(repos, repo{dir, a, exists})
		}
	}
	// The configuration: every key in every repository (one source for
	// them all).
	writeKeys := func(f string) {
		os.MkdirAll(filepath.Dir(f), 0o755)
		for _, a := range gitKeyAttacks {
			if out := run("/", nil, "git", "config", "--file", f, a.key, a.value); out != "" {
				t.Fatalf("git config --file %s: %s", f, out)
			}
		}
	}
	var env []string
	if src.env != nil {
		env = src.env(outFile)
	}
	if outFile != "" {
		writeKeys(outFile)
	}
	for _, r := range repos {
		if src.file == "" || outFile != "" {
			continue
		}
		f := filepath.Join(r.dir, src.file)
		if !src.missing {
			writeKeys(f)
		}
		if src.include != "" {
			run(r.dir, nil, "git", "config", strings.ReplaceAll(src.include, "REPO", r.dir), "../"+src.file)
		}
	}
	// The gateway, with the same environment as the host's git.
	conf, _ := json.Marshal(map[string]any{"sandbox": map[string]any{"mode": "all", "backend": "bwrap", "gitAccess": access},
		"agents": map[string]any{"main": map[string]any{"workspace": ws}}})
	home := e2etest.NewHome(t, string(conf))
	c := e2etest.StartConchEnv(t, home, append(append([]string(nil), base...), env...))
	// One sandboxed run plants every payload.
	var script strings.Builder
	for i, r := range repos {
		mark := filepath.Join(markers, fmt.Sprint(i))
		payload := fmt.Sprintf("#!/bin/sh\\ntouch %s\\nexit 1\\n", mark)
		fmt.Fprintf(&script, "(cd %s && mkdir -p %s && printf '%s' > %s && chmod +x %s) 2>&1\n", r.dir, filepath.Dir(r.attack.target), payload, r.attack.target, r.attack.target)
		if src.inWS {
			f := filepath.Join(r.dir, src.file)
			if outFile != "" {
				f = outFile
			}
			fmt.Fprintf(&script, "(printf '[core]\\n\\tfsmonitor = \"touch %s; false\"\\n[core]\\n\\thooksPath = .evilhooks\\n' >> %s; mkdir -p %s/.evilhooks && printf '%s' > %s/.evilhooks/pre-commit && chmod +x %s/.evilhooks/pre-commit) 2>&1\n",
				mark, f, r.dir, payload, r.dir, r.dir)
		}
	}
	script.WriteString("echo planted\n")
	res := c.Exec(map[string]any{"command": script.String(), "timeout": 120, "yieldMs": 120000})
	if res.Str("host") != "sandbox" || !strings.Contains(res.Text, "planted") {
		t.Fatalf("the sandboxed run: %s %v", res.Text, res.D)
	}
	c.Close()
	// The host's git, as the user runs it: everything that runs a hook,
	// the fsmonitor, a textconv, a clean filter or an ssh command, after
	// the includeIf conditions have come true.
	for i, r := range repos {
		var out strings.Builder
		for _, args := range [][]string{
			{"status"}, {"checkout", "-q", "-b", "feature"}, {"remote", "add", "origin", "https://example.invalid/x"},
			{"status"}, {"diff"}, {"add", "a.txt"}, {"commit", "--allow-empty", "-qm", "x"},
			{"ls-remote", "ssh://example.invalid/x"},
		} {
			if args[0] == "diff" {
				os.WriteFile(filepath.Join(r.dir, "a.txt"), []byte("two\n"), 0o644)
				os.WriteFile(filepath.Join(r.dir, "b.dat"), []byte("dat\n"), 0o644)
			}
			if args[0] == "add" {
				args = append(args, "b.dat")
			}
			fmt.Fprintf(&out, "$ git %s\n%s", strings.Join(args, " "), run(r.dir, env, "git", args...))
		}
		if _, err := os.Stat(filepath.Join(markers, fmt.Sprint(i))); err == nil {
			t.Errorf("gitAccess %s, %s in %s, %s (target %s): the host's git ran the sandbox's code\nsandbox: %s\nhost:\n%s",
				access, r.attack.key, src.name, map[bool]string{false: "missing", true: "existing"}[r.exists], r.attack.target, res.Text, out.String())
		}
	}
}

// TestSandboxGitReproducerCLI is the issue's reproducer through `conch
// exec` (bwrap, default gitAccess ro): core.hooksPath set in a file the
// repository's config includes, and the same from $GIT_CONFIG_GLOBAL
// holding a relative core.hooksPath. The sandboxed command writes a
// pre-commit hook there; the host's next `git commit` must not run it.
func TestSandboxGitReproducerCLI(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	for _, via := range []string{"include.path", "GIT_CONFIG_GLOBAL"} {
		root := t.TempDir()
		h, w, userHome := filepath.Join(root, "h"), filepath.Join(root, "w"), filepath.Join(root, "user")
		mark := filepath.Join(root, "MARK")
		for _, d := range []string{h, w, userHome} {
			os.MkdirAll(d, 0o755)
		}
		os.WriteFile(filepath.Join(h, "config.json"), []byte(`{"sandbox":{"mode":"all","backend":"bwrap"},"tools":{"exec":{"host":"sandbox"}}}`), 0o600)
		env := append(os.Environ(), "HOME="+userHome, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@x",
			"GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@x")
		hooks := "[core]\n\thooksPath = .githooks\n"
		if via == "GIT_CONFIG_GLOBAL" {
			g := filepath.Join(root, "global.gitconfig")
			os.WriteFile(g, []byte(hooks), 0o644)
			env = append(env, "GIT_CONFIG_GLOBAL="+g)
		}
		sh := func(name string, args ...string) string {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Dir, cmd.Env = w, env
			out, _ := cmd.CombinedOutput()
			return string(out)
		}
		sh("git", "init", "-q", ".")
		if via == "include.path" {
			os.WriteFile(filepath.Join(w, ".gitconfig.shared"), []byte(hooks), 0o644)
			sh("git", "config", "include.path", "../.gitconfig.shared")
		}
		sh("git", "commit", "-q", "--allow-empty", "-m", "init")
		out := sh(e2etest.ConchBin, "exec", "--home", h, "-C", w, "--host", "sandbox", "--",
			"mkdir -p .githooks && printf '#!/bin/sh\\ntouch "+mark+"\\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit")
		host := sh("git", "commit", "-q", "--allow-empty", "-m", "x")
		if _, err := os.Stat(mark); err == nil {
			t.Errorf("%s: the host's git commit ran the hook the sandbox wrote\nconch exec: %s\ngit commit: %s", via, out, host)
		}
		if !strings.Contains(out, "Read-only file system") {
			t.Errorf("%s: the sandboxed write did not fail read-only: %s", via, out)
		}
	}
}

// TestSandboxGuardRestoresProtectedPaths: the second line behind the
// read-only mounts. While a sandboxed run is going, a protected path
// changes anyway (here the host writes it, standing in for a way through
// the mounts): the repository's pre-commit hook is rewritten and a
// post-checkout hook appears. When the run ends, conch puts the hook
// back, removes the new one, keeps what was written in the quarantine
// directory, and the result says so.
func TestSandboxGuardRestoresProtectedPaths(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	se := newSandbox(t, nil)
	hostGit(t, se.ws, "init", "-q")
	hook := filepath.Join(se.ws, ".git", "hooks", "pre-commit")
	os.WriteFile(hook, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	done := make(chan e2etest.Result, 1)
	go func() {
		done <- se.c.Exec(map[string]any{"command": "touch started; while [ ! -e go ]; do sleep 0.05; done; echo finished", "yieldMs": 120000, "timeout": 120})
	}()
	deadline := time.Now().Add(e2etest.Slow(60 * time.Second))
	for {
		if _, err := os.Stat(filepath.Join(se.ws, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandboxed run did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.WriteFile(hook, []byte("#!/bin/sh\ntouch /tmp/pwned-guard\n"), 0o755)
	os.WriteFile(filepath.Join(se.ws, ".git", "hooks", "post-checkout"), []byte("#!/bin/sh\ntouch /tmp/pwned-guard\n"), 0o755)
	os.WriteFile(filepath.Join(se.ws, "go"), nil, 0o644)
	r := <-done
	t.Log(r.Text)
	if !strings.Contains(r.Text, "finished") || !strings.Contains(r.Text, "conch put them back") ||
		!strings.Contains(r.Text, ".git/hooks/pre-commit (changed, restored)") || !strings.Contains(r.Text, ".git/hooks/post-checkout (added, removed)") {
		t.Fatalf("the result does not report the restored paths: %s", r.Text)
	}
	if b, _ := os.ReadFile(hook); string(b) != "#!/bin/sh\nexit 0\n" {
		t.Fatalf("pre-commit not restored: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(se.ws, ".git", "hooks", "post-checkout")); err == nil {
		t.Fatal("the new post-checkout hook was left in place")
	}
	q, _ := filepath.Glob(filepath.Join(se.home, "sandboxes", "quarantine", "*", ".git", "hooks", "pre-commit"))
	if len(q) != 1 {
		t.Fatalf("what was written is not in the quarantine: %v", q)
	}
	// A run that changes nothing says nothing.
	if r := se.c.Exec(map[string]any{"command": "echo quiet"}); strings.Contains(r.Text, "put them back") {
		t.Fatalf("a run that changed nothing: %s", r.Text)
	}
}

// TestSandboxLandlockGit: the landlock backend cannot keep a path below
// the writable workspace read-only, and `conch doctor` says so
// (sandbox.landlock_git). What a run writes there is put back when it
// ends: a pre-commit hook written inside is gone before the host's git
// commits, and the result says so.
func TestSandboxLandlockGit(t *testing.T) {
	needBwrap(t)
	if abi, _, errno := syscall.Syscall(444 /* landlock_create_ruleset */, 0, 0, 1); errno != 0 || abi == 0 {
		t.Skip("the kernel offers no Landlock")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	se := newSandbox(t, map[string]any{"backend": "landlock"})
	hostGit(t, se.ws, "init", "-q")
	hostGit(t, se.ws, "commit", "-q", "--allow-empty", "-m", "init")
	mark := filepath.Join(filepath.Dir(se.ws), "MARK")
	r := se.c.Exec(map[string]any{"command": "printf '#!/bin/sh\\ntouch " + mark + "\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo wrote"})
	t.Log(r.Text)
	if !strings.Contains(r.Text, "wrote") || !strings.Contains(r.Text, ".git/hooks/pre-commit (added, removed)") {
		t.Fatalf("landlock: the result does not report the hook it removed: %s", r.Text)
	}
	hostGit(t, se.ws, "commit", "-q", "--allow-empty", "-m", "x")
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("landlock: the host's git ran the hook the sandboxed run wrote")
	}
	out, _ := exec.Command(e2etest.ConchBin, "doctor", "--home", se.home).CombinedOutput()
	if !strings.Contains(string(out), "sandbox.landlock_git") || !strings.Contains(string(out), "does not protect repositories") {
		t.Fatalf("conch doctor does not say that landlock leaves repositories writable:\n%s", out)
	}
}
