package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuardAnchorReplaced generates the runs that move a directory on
// the way to a protected path (.git itself, a submodule's git directory
// and the modules/ above it, the parent of a core.hooksPath directory)
// and leave something else in its place — a symbolic link to where it
// went, a gitdir: file naming it, a plain file, a new directory — with
// planted config and hooks at the new place. After Check nothing of what
// the run planted is reachable at the protected paths (links followed,
// as the host's git follows them), every recorded file reads as before,
// and the host's git run there runs nothing (where git is installed).
// The old Guard skipped such a root and reported "could not restore".
func TestGuardAnchorReplaced(t *testing.T) {
	const evil = "[core]\n\tfsmonitor = touch PWNED; false\n\thooksPath = tools/hooks\n"
	anchors := []string{".git", ".git/modules", ".git/modules/sub", "tools"}
	kinds := []string{"link", "gitdir", "file", "fresh"}
	rootSets := map[string][]string{
		"ro": {".git", "tools/hooks"},
		"rw": {".git/config", ".git/hooks", ".git/modules/sub/config", "tools/hooks"},
	}
	for access, roots := range rootSets {
		for _, a := range anchors {
			for _, k := range kinds {
				name := access + "/" + a + "/" + k
				ws := t.TempDir()
				mark := filepath.Join(t.TempDir(), "pwned")
				for _, gd := range []string{".git", ".git/modules/sub"} {
					for _, d := range []string{"hooks", "objects", "refs"} {
						os.MkdirAll(filepath.Join(ws, gd, d), 0o755)
					}
					os.WriteFile(filepath.Join(ws, gd, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
					os.WriteFile(filepath.Join(ws, gd, "config"), []byte("[core]\n\tbare = false\n"), 0o644)
				}
				os.MkdirAll(filepath.Join(ws, "tools", "hooks"), 0o755)
				os.WriteFile(filepath.Join(ws, "tools", "hooks", "pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
				g := NewGuard(ws, roots)
				recorded := map[string]string{}
				for rel, e := range g.entries {
					if e.mode.IsRegular() {
						recorded[rel] = string(e.data)
					}
				}
				if len(recorded) == 0 {
					t.Fatalf("%s: nothing recorded", name)
				}
				// The run: move the anchor away, leave k in its place,
				// plant at the new place.
				p := filepath.Join(ws, a)
				moved := p + ".moved"
				if err := os.Rename(p, moved); err != nil {
					t.Fatal(err)
				}
				plantAt := moved
				switch k {
				case "link":
					os.Symlink(filepath.Base(moved), p)
				case "gitdir":
					os.WriteFile(p, []byte("gitdir: "+filepath.Base(moved)+"\n"), 0o644)
				case "file":
					os.WriteFile(p, []byte("x\n"), 0o644)
				case "fresh":
					os.CopyFS(p, os.DirFS(moved))
					plantAt = p
				}
				evilCfg := strings.ReplaceAll(evil, "PWNED", mark)
				filepath.Walk(plantAt, func(f string, fi os.FileInfo, err error) error {
					if err == nil && fi.Mode().IsRegular() {
						switch filepath.Base(f) {
						case "config":
							os.WriteFile(f, []byte(evilCfg), 0o644)
						case "pre-commit":
							os.WriteFile(f, []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755)
						}
					}
					return nil
				})
				os.WriteFile(filepath.Join(plantAt, "hooks", "post-checkout"), []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755)
				cs := g.Check(filepath.Join(t.TempDir(), "q"))
				if len(cs) == 0 {
					t.Errorf("%s: no change reported", name)
				}
				for _, c := range cs {
					if strings.HasPrefix(c.Action, "could not") || strings.Contains(c.Action, "could not") {
						t.Errorf("%s: %s %s: %s", name, c.Path, c.What, c.Action)
					}
				}
				for rel, want := range recorded {
					if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != want {
						t.Errorf("%s: %s reads %q (%v), recorded %q", name, rel, b, err, want)
					}
				}
				for _, h := range []string{".git/hooks/post-checkout", "tools/hooks/post-checkout", ".git/modules/sub/hooks/post-checkout"} {
					if _, err := os.Stat(filepath.Join(ws, h)); err == nil {
						t.Errorf("%s: the planted %s is still reachable", name, h)
					}
				}
				if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
					t.Errorf("%s: %s is not a directory after Check (%v)", name, a, err)
				}
				if again := g.Check(filepath.Join(t.TempDir(), "q")); len(again) != 0 {
					t.Errorf("%s: a second check still finds %v", name, again)
				}
				if git, err := exec.LookPath("git"); err == nil {
					cmd := exec.Command(git, "-c", "safe.directory=*", "status")
					cmd.Dir, cmd.Env = ws, append(gitEnv(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(ws))
					cmd.Run()
					if _, err := os.Stat(mark); err == nil {
						t.Errorf("%s: the host's git status ran what the run planted", name)
					}
				}
			}
		}
	}
}
