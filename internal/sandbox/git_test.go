package sandbox

import (
	"os"
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

	got, err := GitProtected(ws, "ro")
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
	got, err = GitProtected(ws, "rw")
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
	if _, err := GitProtected(ws, "ro"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a symlinked .git: %v", err)
	}
}

func TestFilterProgramRefusesForeignArch(t *testing.T) {
	raw, err := filterProgram(nil)
	if err != nil {
		t.Fatal(err)
	}
	// ld arch; jeq native; ret ERRNO(ENOSYS)
	if len(raw) < 3 || raw[0].K != 4 || raw[1].K != nativeArch() || raw[2].K&0xffff != 38 {
		t.Fatalf("program does not start with the architecture guard: %v", raw[:3])
	}
}

func TestOthersRead(t *testing.T) {
	d := t.TempDir()
	os.Chmod(d, 0o755)
	os.MkdirAll(filepath.Join(d, "open", "deep"), 0o755)
	os.WriteFile(filepath.Join(d, "open", "deep", "f"), nil, 0o644)
	os.MkdirAll(filepath.Join(d, "mixed"), 0o755)
	os.WriteFile(filepath.Join(d, "mixed", "pub"), nil, 0o644)
	os.WriteFile(filepath.Join(d, "mixed", "secret"), nil, 0o600)
	os.MkdirAll(filepath.Join(d, "private"), 0o700)
	os.Symlink(filepath.Join(d, "mixed", "secret"), filepath.Join(d, "link"))
	var dirs, files, listed []string
	if othersRead(d, 0, &dirs, &files, &listed) {
		t.Fatal("a tree with a 0600 file is wholly readable")
	}
	if !slices.Equal(dirs, []string{filepath.Join(d, "open")}) || !slices.Equal(files, []string{filepath.Join(d, "mixed", "pub")}) ||
		!slices.Contains(listed, d) || !slices.Contains(listed, filepath.Join(d, "mixed")) {
		t.Fatalf("dirs %v files %v listed %v", dirs, files, listed)
	}
}
