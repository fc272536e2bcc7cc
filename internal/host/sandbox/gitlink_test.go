package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The host's `git status` runs `git status` inside every submodule the
// index lists, at any depth: each one's .git is protected wherever it
// is, and one not populated (a clone without --recurse-submodules) has
// its directory read-only under "ro", so the command cannot make a
// repository of its own there. A real git makes the repositories.
func TestGitProtectedSubmodulesOfTheIndex(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	base := t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=a@b", "-c", "user.name=a", "-c", "protocol.file.allow=always"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	src := filepath.Join(base, "src")
	os.Mkdir(src, 0o755)
	git(src, "init", "-q")
	git(src, "commit", "-q", "--allow-empty", "-m", "s")
	ws := filepath.Join(base, "ws")
	os.Mkdir(ws, 0o755)
	git(ws, "init", "-q")
	git(ws, "commit", "-q", "--allow-empty", "-m", "i")
	// Populated, deeper than the search goes (its .git is a file).
	git(ws, "submodule", "-q", "add", src, "a/b/c/d/e/deep")
	// Listed by the index, not populated, its directory missing.
	out, err := exec.Command("git", "-C", src, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	git(ws, "update-index", "--add", "--cacheinfo", "160000,"+string(out[:40])+",x/y/empty")
	// conch reads the index with git: the fsmonitor a repository names
	// (one a command made, at a submodule's place) does not run.
	ran := filepath.Join(base, "fsmonitor-ran")
	for _, d := range []string{filepath.Join(ws, ".git"), filepath.Join(ws, ".git/modules/a/b/c/d/e/deep")} {
		cmd := exec.Command("git", "config", "core.fsmonitor", "touch "+ran+"; true #")
		cmd.Env = append(os.Environ(), "GIT_DIR="+d)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git config: %v: %s", err, out)
		}
	}
	for _, tc := range []struct {
		access string
		want   []string
		not    []string
	}{
		{"ro", []string{".git", "a/b/c/d/e/deep/.git", "x/y/empty"}, nil},
		{"rw", []string{"a/b/c/d/e/deep/.git"}, []string{"x/y/empty"}},
	} {
		got, err := GitProtected("", ws, tc.access)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: %s missing from %v", tc.access, w, got)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(got, w) {
				t.Errorf("%s: %s protected: %v", tc.access, w, got)
			}
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("reading the index ran the repository's core.fsmonitor")
	}
	if fi, err := os.Stat(filepath.Join(ws, "x/y/empty")); err != nil || !fi.IsDir() {
		t.Errorf("the unpopulated submodule's directory was not made: %v", err)
	}
}

// TestGitProtectedSubmodulesOfEnclosingRepo: a workspace that is a
// subdirectory of a checkout: the submodules that checkout's index lists
// inside the workspace are protected the same way (the host's git status
// at the checkout's top runs inside them).
func TestGitProtectedSubmodulesOfEnclosingRepo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=a@b", "-c", "user.name=a"}, args...)...)
		cmd.Dir = top
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "i")
	head := git("rev-parse", "HEAD")[:40]
	git("update-index", "--add", "--cacheinfo", "160000,"+head+",ws/sub")
	git("update-index", "--add", "--cacheinfo", "160000,"+head+",elsewhere/sub")
	ws := filepath.Join(top, "ws")
	os.Mkdir(ws, 0o755)
	got, err := GitProtected("", ws, "ro")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "sub") {
		t.Errorf("the enclosing checkout's submodule in the workspace is not protected: %v", got)
	}
	for _, p := range got {
		if strings.HasPrefix(p, "..") {
			t.Errorf("a path outside the workspace: %v", got)
		}
	}
	if _, err := os.Stat(filepath.Join(top, "elsewhere")); err == nil {
		t.Error("a submodule directory outside the workspace was made")
	}
}

// TestGitProtectedLinkedWorktreesAtAnyDepth: a linked worktree deeper
// than the search goes is found through its git directory's
// worktrees/*/gitdir, so its .git file and the hooks directory a relative
// core.hooksPath names in it are protected (the host's git commit there
// ran hooks the command wrote).
func TestGitProtectedLinkedWorktreesAtAnyDepth(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=a@b", "-c", "user.name=a"}, args...)...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "i")
	git("config", "core.hooksPath", ".hooks")
	git("worktree", "add", "-q", "a/b/c/d/e/f/wt")
	for _, access := range []string{"ro", "rw"} {
		got, err := GitProtected("", ws, access)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"a/b/c/d/e/f/wt/.git", "a/b/c/d/e/f/wt/.hooks"} {
			if !slices.Contains(got, w) {
				t.Errorf("%s: %s missing from %v", access, w, got)
			}
		}
	}
}
