package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestGitProtected(t *testing.T) {
	ws := t.TempDir()
	mk := func(p string) { os.MkdirAll(filepath.Join(ws, p), 0o755) }
	wf := func(p, s string) { mk(filepath.Dir(p)); os.WriteFile(filepath.Join(ws, p), []byte(s), 0o644) }
	wf(".git/HEAD", "ref: refs/heads/main\n")
	wf(".git/config", "[core]\n")
	mk(".git/modules/sub/hooks")
	wf(".git/modules/sub/HEAD", "x\n")
	wf(".git/modules/sub/config", "x\n")
	wf(".git/worktrees/wt/HEAD", "x\n")
	wf(".git/worktrees/wt/commondir", "../..\n")
	wf("sub/.git", "gitdir: ../.git/modules/sub\n")
	wf("wt/.git", "gitdir: "+filepath.Join(ws, ".git/worktrees/wt")+"\n")
	wf("a/b/.git/HEAD", "x\n")
	wf("a/b/c/d/e/.git/HEAD", "too deep\n")
	wf("outside/.git", "gitdir: /elsewhere/.git\n")
	wf("own/.git", "gitdir: ../owngit\n")
	wf("owngit/HEAD", "x\n")

	got, err := GitProtected("", ws, "ro")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".git", "a/b/.git", "outside/.git", "own/.git", "owngit", "sub/.git", "wt/.git"}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("ro: %s missing from %v", w, got)
		}
	}
	if slices.Contains(got, "a/b/c/d/e/.git") {
		t.Errorf("ro: searched deeper than %d levels: %v", gitSearchDepth, got)
	}
	got, err = GitProtected("", ws, "rw")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{".git/config", ".git/hooks", ".git/modules/sub/config", ".git/modules/sub/hooks", ".git/worktrees/wt/commondir",
		"sub/.git", "wt/.git", "a/b/.git/hooks", "owngit/hooks"} {
		if !slices.Contains(got, w) {
			t.Errorf("rw: %s missing from %v", w, got)
		}
	}
	if fi, err := os.Stat(filepath.Join(ws, ".git", "hooks")); err != nil || !fi.IsDir() {
		t.Errorf("rw: no hooks placeholder: %v", err)
	}
	for _, p := range got {
		if strings.HasSuffix(p, "commondir") && p != ".git/worktrees/wt/commondir" {
			t.Errorf("rw: a commondir was made: %s", p)
		}
	}
	os.Symlink("/tmp", filepath.Join(ws, "a", ".git"))
	if _, err := GitProtected("", ws, "ro"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a symlinked .git: %v", err)
	}
}

// TestGitSearchBudget: the command can fill the workspace with more
// directories than the search reads, named to sort before the
// repositories. The workspace's own .git is still found (the search goes
// level by level), and a repository one search found is found by every
// later one (the record in the conch home), for either access.
func TestGitSearchBudget(t *testing.T) {
	defer func(n int) { gitSearchDirs = n }(gitSearchDirs)
	gitSearchDirs = 300
	for _, access := range []string{"ro", "rw"} {
		home, ws := t.TempDir(), t.TempDir()
		for _, g := range []string{".git", "a/b/.git", "lib/.git"} {
			os.MkdirAll(filepath.Join(ws, g, "hooks"), 0o755)
			os.WriteFile(filepath.Join(ws, g, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
			os.WriteFile(filepath.Join(ws, g, "config"), []byte("[core]\n"), 0o644)
		}
		want := map[string]string{"ro": ".git", "rw": ".git/config"}[access]
		first, err := GitProtected(home, ws, access)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []string{"", "a/b/", "lib/"} {
			if !slices.Contains(first, g+want) {
				t.Fatalf("%s: %s%s not found before the flood: %v", access, g, want, first)
			}
		}
		// The flood: at the top and inside a/, before b.
		for i := 0; i <= gitSearchDirs; i++ {
			os.Mkdir(filepath.Join(ws, fmt.Sprintf("!%d", i)), 0o755)
			os.Mkdir(filepath.Join(ws, "a", fmt.Sprintf("!%d", i)), 0o755)
		}
		fresh, err := GitProtected("", ws, access)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(fresh, want) {
			t.Errorf("%s: the workspace's own repository is lost in the flood: %v", access, fresh)
		}
		again, err := GitProtected(home, ws, access)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(again, first) {
			t.Errorf("%s: after the flood: %v, before: %v", access, again, first)
		}
		// A repository removed on the host is forgotten.
		os.RemoveAll(filepath.Join(ws, "lib"))
		if got, _ := GitProtected(home, ws, access); slices.Contains(got, "lib/"+want) || !slices.Contains(got, "a/b/"+want) {
			t.Errorf("%s: after lib was removed: %v", access, got)
		}
	}
}

// TestPlaceholdersDoNotFollowLinks: with gitAccess "rw" the search makes
// missing placeholders on the host, as conch's user (root, perhaps). A
// config the command replaced with a link is not read through it, so a
// file outside the workspace decides nothing (and leaks nothing).
func TestPlaceholdersDoNotFollowLinks(t *testing.T) {
	ws, out := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(out, "secret"), []byte("[extensions]\n\tworktreeConfig = true\n"), 0o600)
	os.Symlink(filepath.Join(out, "secret"), filepath.Join(ws, ".git", "config"))
	GitProtected("", ws, "rw")
	if _, err := os.Lstat(filepath.Join(ws, ".git", "config.worktree")); err == nil {
		t.Fatal("config.worktree made from a config read through a link")
	}
	os.Remove(filepath.Join(ws, ".git", "config"))
	os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[extensions]\n\tworktreeConfig = true\n"), 0o644)
	GitProtected("", ws, "rw")
	if fi, err := os.Lstat(filepath.Join(ws, ".git", "config.worktree")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("no config.worktree placeholder: %v", err)
	}
}

// TestHooksPathProtected: core.hooksPath naming a directory of the
// workspace, and include.path / includeIf.*.path naming a file of it, are
// protected like .git/hooks and .git/config (made empty first when
// missing, by their real path when they go through a link); what lies
// outside the workspace is not in the sandbox. A path through a link in
// the workspace fails the run (the command could point it elsewhere).
func TestHooksPathProtected(t *testing.T) {
	if gitBin() == "" {
		t.Skip("git is not installed")
	}
	for _, c := range []struct{ conf, want string }{
		{"[core]\n\thooksPath = .githooks\n", ".githooks"},
		{"[CORE]\n\tHooksPath = \"tools/hooks\" ; husky\n", "tools/hooks"},
		{"[core] hookspath = .husky/_ # comment\n", ".husky/_"},
		{"[core]\n\thooksPath = lnk/h\n", "error"},
		{"[core]\n\thooksPath = /nowhere/hooks\n", ""},
		{"[user]\n\thooksPath = .githooks\n", ""},
		{"[include]\n\tpath = ../shared.gitconfig\n", "shared.gitconfig"},
		{"[includeIf \"gitdir:/\"]\n\tpath = ../conf/git\n", "conf/git"},
		{"[include]\n\tpath = config.local\n", ".git/config.local"},
	} {
		ws := t.TempDir()
		if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		os.MkdirAll(filepath.Join(ws, "real", "h"), 0o755)
		os.Symlink("real", filepath.Join(ws, "lnk"))
		os.WriteFile(filepath.Join(ws, ".git", "config"), []byte(c.conf), 0o644)
		for _, access := range []string{"ro", "rw"} {
			got, err := GitProtected("", ws, access)
			if c.want == "error" {
				if !errors.Is(err, ErrLinkInWorkspace) {
					t.Errorf("%q %s: %v %v, want ErrLinkInWorkspace", c.conf, access, got, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%q: %v", c.conf, err)
			}
			if c.want == "" {
				for _, g := range got {
					if g != ".git" && !strings.HasPrefix(g, ".git/") {
						t.Errorf("%q %s: %v", c.conf, access, got)
					}
				}
				continue
			}
			if !slices.Contains(got, c.want) {
				t.Errorf("%q %s: %s not in %v", c.conf, access, c.want, got)
			}
			if fi, err := os.Lstat(filepath.Join(ws, c.want)); err != nil || fi.IsDir() != strings.Contains(strings.ToLower(c.conf), "hookspath") {
				t.Errorf("%q %s: %s not made: %v", c.conf, access, c.want, err)
			}
		}
	}
}

// TestGitSeenKeepsOldest: the record of found repositories is bounded; a
// command that makes more repositories of its own than it holds (named
// to sort first) does not push out the ones recorded before.
func TestGitSeenKeepsOldest(t *testing.T) {
	defer func(n, d int) { maxSeen, gitSearchDirs = n, d }(maxSeen, gitSearchDirs)
	maxSeen, gitSearchDirs = 20, 1000
	home, ws := t.TempDir(), t.TempDir()
	mk := func(g string) {
		os.MkdirAll(filepath.Join(ws, g), 0o755)
		os.WriteFile(filepath.Join(ws, g, "HEAD"), []byte("x\n"), 0o644)
	}
	mk("lib/.git")
	GitProtected(home, ws, "ro")
	for i := 0; i < 3*maxSeen; i++ {
		mk(fmt.Sprintf("!%02d/.git", i))
	}
	GitProtected(home, ws, "ro")
	// Now hide lib behind more directories than the search reads.
	gitSearchDirs = 10
	if got, _ := GitProtected(home, ws, "ro"); !slices.Contains(got, "lib/.git") {
		t.Fatalf("lib/.git pushed out of the record: %v", got)
	}
}
