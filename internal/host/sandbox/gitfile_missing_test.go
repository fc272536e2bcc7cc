package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestGitFileNamesMissingDir generates .git files (of the workspace and
// of a subdirectory, relative and absolute, one and several levels deep)
// naming a git directory inside the workspace that does not exist, and
// checks that GitProtected makes it, empty, and protects it under both
// gitAccess settings: the command could otherwise make a repository there
// whose core.fsmonitor the host's `git status` runs.
func TestGitFileNamesMissingDir(t *testing.T) {
	for _, at := range []string{".", "sub"} {
		for _, target := range []string{"later", "a/b/later", "ABS"} {
			for _, access := range []string{"ro", "rw"} {
				name := at + "/" + target + "/" + access
				ws := t.TempDir()
				os.MkdirAll(filepath.Join(ws, at), 0o755)
				want := filepath.Join(at, target)
				line := target
				if target == "ABS" {
					want = "abs-later"
					line = filepath.Join(ws, want)
				}
				os.WriteFile(filepath.Join(ws, at, ".git"), []byte("gitdir: "+line+"\n"), 0o644)
				got, err := GitProtected("", ws, access)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !slices.Contains(got, filepath.Clean(want)) {
					t.Errorf("%s: %s not protected (got %v)", name, want, got)
				}
				if fi, err := os.Stat(filepath.Join(ws, want)); err != nil || !fi.IsDir() {
					t.Errorf("%s: %s not made: %v", name, want, err)
				}
			}
		}
	}
}
