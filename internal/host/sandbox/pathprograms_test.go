package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGitDefaultProgramsInWorkspacePATH: git runs its default pager,
// editor, ssh and gpg by name from PATH. With a PATH directory inside the
// workspace, each of them present there is protected like a program
// git's configuration names (a command could replace it and the host's
// next git log would run it); a missing one is not made, and every
// sandboxed run is warned of the directory (PathWarning). Without such a
// directory nothing is protected and nothing warned.
func TestGitDefaultProgramsInWorkspacePATH(t *testing.T) {
	if gitBin() == "" {
		t.Skip("no git")
	}
	for _, prog := range gitDefaultPrograms {
		t.Run(prog, func(t *testing.T) {
			ws := t.TempDir()
			if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
				t.Fatalf("git init: %v %s", err, out)
			}
			bin := filepath.Join(ws, "tools", "bin")
			os.MkdirAll(bin, 0o755)
			if err := os.WriteFile(filepath.Join(bin, prog), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			old := os.Getenv("PATH")
			t.Setenv("PATH", bin+string(os.PathListSeparator)+old)
			got, err := GitProtected("", ws, "ro")
			if err != nil {
				t.Fatal(err)
			}
			rel := filepath.Join("tools", "bin", prog)
			if !slices.Contains(got, rel) {
				t.Errorf("%s in a PATH directory of the workspace is not protected: %v", rel, got)
			}
			for _, other := range gitDefaultPrograms {
				if other != prog && slices.Contains(got, filepath.Join("tools", "bin", other)) {
					t.Errorf("a missing %s was protected (made): %v", other, got)
				}
			}
			if _, err := os.Stat(filepath.Join(bin, "vi")); prog != "vi" && err == nil {
				t.Error("a placeholder was made in the PATH directory")
			}
			if w := PathWarning(ws); !strings.Contains(w, bin) {
				t.Errorf("no warning of the PATH directory %s: %q", bin, w)
			}
			t.Setenv("PATH", old)
			if got, _ := GitProtected("", ws, "ro"); slices.Contains(got, rel) {
				t.Errorf("%s protected with no PATH directory in the workspace: %v", rel, got)
			}
			if w := PathWarning(ws); w != "" {
				t.Errorf("warned with no PATH directory in the workspace: %q", w)
			}
		})
	}
	t.Run("symbolic link", func(t *testing.T) {
		// node_modules/.bin holds links: one named like a default
		// program is not protected (the command could retarget it),
		// and does not fail the run either; the warning covers it.
		ws := t.TempDir()
		exec.Command("git", "init", "-q", ws).Run()
		bin := filepath.Join(ws, "node_modules", ".bin")
		os.MkdirAll(bin, 0o755)
		os.Symlink("../pager/less.js", filepath.Join(bin, "less"))
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		if _, err := GitProtected("", ws, "ro"); err != nil {
			t.Errorf("a link named like a default program in a PATH directory failed the run: %v", err)
		}
		if w := PathWarning(ws); !strings.Contains(w, bin) {
			t.Errorf("no warning of %s: %q", bin, w)
		}
	})
	t.Run("relative entry", func(t *testing.T) {
		t.Setenv("PATH", "node_modules/.bin"+string(os.PathListSeparator)+os.Getenv("PATH"))
		if w := PathWarning(t.TempDir()); !strings.Contains(w, `"node_modules/.bin" (relative)`) {
			t.Errorf("a relative PATH entry is not warned of: %q", w)
		}
	})
}
