//go:build linux

package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

// TestBwrapBindsNeverFollowLinks: the command writes the workspace, so
// any symbolic link on the way to a path the sandbox binds would make
// bwrap mount a host directory of its choosing (a writable one for the
// directories above a protected path). Each layout below is one a
// command can leave behind; for every one, either the run fails or no
// bind below the workspace passes through a link.
func TestBwrapBindsNeverFollowLinks(t *testing.T) {
	b := &Bwrap{bin: "/usr/bin/bwrap"}
	b.probe.Get(context.Background(), func() error { return nil })
	layouts := []struct {
		name  string
		setup func(ws, out string)
		want  string // a bind source below the workspace that must be there ("" none)
	}{
		{"gitfile-through-parent-link", func(ws, out string) {
			os.Symlink("..", filepath.Join(ws, "link"))
			os.WriteFile(filepath.Join(ws, "sub", ".git"), []byte("gitdir: ../link/out/secret\n"), 0o644)
		}, "sub/.git"},
		{"gitfile-through-abs-link", func(ws, out string) {
			os.Symlink(out, filepath.Join(ws, "link"))
			os.WriteFile(filepath.Join(ws, "sub", ".git"), []byte("gitdir: "+filepath.Join(ws, "link", "secret")+"\n"), 0o644)
		}, "sub/.git"},
		{"gitfile-through-inner-link", func(ws, out string) {
			os.MkdirAll(filepath.Join(ws, "real", "gd"), 0o755)
			os.WriteFile(filepath.Join(ws, "real", "gd", "HEAD"), []byte("x\n"), 0o644)
			os.Symlink("real", filepath.Join(ws, "link"))
			os.WriteFile(filepath.Join(ws, "sub", ".git"), []byte("gitdir: ../link/gd\n"), 0o644)
		}, "real/gd"},
		{"member-commondir-link", func(ws, out string) { os.Symlink("../..", filepath.Join(ws, ".git", "commondir")) }, ""},
		{"member-info-link", func(ws, out string) {
			os.RemoveAll(filepath.Join(ws, ".git", "info"))
			os.Symlink(out, filepath.Join(ws, ".git", "info"))
		}, ""},
		{"member-config-worktree-link", func(ws, out string) {
			os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[extensions]\n\tworktreeConfig = true\n"), 0o644)
			os.Symlink(filepath.Join(out, "secret"), filepath.Join(ws, ".git", "config.worktree"))
		}, ""},
		{"modules-link", func(ws, out string) {
			os.MkdirAll(filepath.Join(out, "secret", "m"), 0o755)
			os.WriteFile(filepath.Join(out, "secret", "m", "HEAD"), []byte("x\n"), 0o644)
			os.Symlink(filepath.Join(out, "secret"), filepath.Join(ws, ".git", "modules"))
		}, ".git"},
		{"protect-path-link", func(ws, out string) { os.Symlink(out, filepath.Join(ws, ".conch")) }, ""},
	}
	for _, access := range []string{"ro", "rw"} {
		for _, l := range layouts {
			root := t.TempDir()
			ws, out := filepath.Join(root, "ws"), filepath.Join(root, "out")
			os.MkdirAll(filepath.Join(out, "secret"), 0o700)
			for _, d := range []string{".git/hooks", ".git/info", ".git/objects", "sub"} {
				os.MkdirAll(filepath.Join(ws, d), 0o755)
			}
			os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
			os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644)
			l.setup(ws, out)
			s := (&config.Config{}).SandboxFor("main")
			s.On, s.GitAccess = true, access
			r := &sandbox.Run{Home: filepath.Join(root, "h"), Exe: "/x/conch", Settings: s, Workspace: ws, Cwd: ws, Command: "true"}
			argv, _, err := b.Command(r)
			if err != nil {
				t.Logf("%s/%s: refused: %v", access, l.name, err)
				continue
			}
			src := ws
			if os.Geteuid() == 0 {
				src = StageDir + "/ws"
			}
			var binds []string
			for i := 0; i+2 < len(argv); i++ {
				if argv[i] != "--bind" && argv[i] != "--ro-bind" {
					continue
				}
				rel, ok := sandbox.Within(src, argv[i+1])
				if !ok || rel == "." {
					continue
				}
				binds = append(binds, rel)
				cur := ws
				for _, part := range strings.Split(rel, "/") {
					cur = filepath.Join(cur, part)
					if fi, err := os.Lstat(cur); err != nil || fi.Mode()&os.ModeSymlink != 0 {
						t.Errorf("%s/%s: bwrap would bind %s through %s (%v)", access, l.name, rel, cur, err)
						break
					}
				}
			}
			if l.want != "" && !slices.ContainsFunc(binds, func(b string) bool { return b == l.want || strings.HasPrefix(l.want, b+"/") }) {
				t.Errorf("%s/%s: %s is not protected: %v", access, l.name, l.want, binds)
			}
		}
	}
}
