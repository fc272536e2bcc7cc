package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuardReadOnlyState generates what a run under a backend that cannot
// mount the git directory read-only (landlock) can leave in it besides
// its configuration and hooks — a submodule of its own registered in the
// index (the host's `git status` runs that repository's fsmonitor), a
// rebase, cherry-pick or am in progress with exec lines — and checks that
// with gitAccess "ro" (the git directory protected whole) the Guard
// removes or restores each and the host's git status runs nothing, while
// with "rw" (members only) the index is the run's to change, and under a
// backend that mounts the git directory read-only (bwrap) the state is
// left alone (the user's). The old Guard recorded config, hooks and info
// only.
func TestGuardReadOnlyState(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(git, append([]string{"-c", "user.email=a@b", "-c", "user.name=a", "-c", "safe.directory=*"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	changes := map[string]func(ws, mark string){
		"submodule": func(ws, mark string) {
			sub := filepath.Join(ws, "sub")
			os.Mkdir(sub, 0o755)
			run(sub, "init", "-q")
			run(sub, "commit", "-q", "--allow-empty", "-m", "s")
			run(sub, "config", "core.fsmonitor", "touch "+mark+"; false")
			out, _ := exec.Command(git, "-C", sub, "rev-parse", "HEAD").Output()
			run(ws, "update-index", "--add", "--cacheinfo", "160000,"+strings.TrimSpace(string(out))+",sub")
		},
		"rebase-merge": func(ws, mark string) {
			d := filepath.Join(ws, ".git", "rebase-merge")
			os.MkdirAll(d, 0o755)
			os.WriteFile(filepath.Join(d, "git-rebase-todo"), []byte("exec touch "+mark+"\n"), 0o644)
			os.WriteFile(filepath.Join(d, "interactive"), nil, 0o644)
		},
		"sequencer": func(ws, mark string) {
			os.MkdirAll(filepath.Join(ws, ".git", "sequencer"), 0o755)
			os.WriteFile(filepath.Join(ws, ".git", "sequencer", "todo"), []byte("exec touch "+mark+"\n"), 0o644)
		},
		"rebase-apply": func(ws, mark string) {
			os.MkdirAll(filepath.Join(ws, ".git", "rebase-apply"), 0o755)
			os.WriteFile(filepath.Join(ws, ".git", "rebase-apply", "applying"), nil, 0o644)
		},
	}
	for name, change := range changes {
		for _, access := range []string{"ro", "rw", "ro-mounted"} {
			ws := t.TempDir()
			mark := filepath.Join(t.TempDir(), "pwned")
			run(ws, "init", "-q")
			run(ws, "commit", "-q", "--allow-empty", "-m", "init")
			roots := []string{".git"}
			if access == "rw" {
				roots = []string{".git/config", ".git/hooks"}
			}
			// ro-mounted: bwrap, whose read-only mount is the protection;
			// the state is not recorded (a `git add` of the user's on the
			// host during the run stays).
			g := NewGuardFor(ws, roots, access == "ro-mounted")
			change(ws, mark)
			cs := g.Check(filepath.Join(t.TempDir(), "q"))
			for _, c := range cs {
				if strings.Contains(c.Action, "could not") {
					t.Errorf("%s/%s: %s %s: %s", name, access, c.Path, c.What, c.Action)
				}
			}
			state := filepath.Join(ws, ".git", name)
			if name == "submodule" {
				cmd := exec.Command(git, "-c", "safe.directory=*", "status")
				cmd.Dir = ws
				cmd.Run()
				_, err := os.Stat(mark)
				if ran := err == nil; ran != (access != "ro") {
					t.Errorf("%s/%s: the host's git status ran the submodule's fsmonitor: %v (changes %v)", name, access, ran, cs)
				}
				continue
			}
			_, err := os.Stat(state)
			if left := err == nil; left != (access != "ro") {
				t.Errorf("%s/%s: %s left in place: %v (changes %v)", name, access, state, left, cs)
			}
		}
	}
}
