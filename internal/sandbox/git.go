package sandbox

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Git on the host reads a repository's git directory as configuration
// and runs what it names: config (core.fsmonitor, core.pager, alias.*,
// include.path, …), config.worktree, commondir (which moves all of it
// into another directory), hooks/, info/, the gitdir: line of a .git
// file, and the same inside every submodule (modules/…) and linked
// worktree (worktrees/…) directory. A sandboxed command that can write
// any of these can make the user's next `git status` run its code.
//
// GitMembers are the names inside a git directory that bwrap mounts
// read-only when they exist (sandbox.gitAccess "rw"; with "ro", the
// default, the whole git directory is read-only).
var GitMembers = []string{"config", "config.worktree", "commondir", "hooks", "info"}

// Limits of the search for repositories in the workspace at the start of
// a run: .git entries this many directory levels below it, in at most
// this many directories.
const (
	gitSearchDepth = 4
	gitSearchDirs  = 5000
)

// GitProtected returns the workspace-relative paths a run mounts
// read-only to keep the workspace's repositories from being turned
// against the host's git: every .git directory (access "ro") or its
// GitMembers (access "rw", submodule and worktree directories inside it
// included), every .git file, and a git directory a .git file inside the
// workspace points to (by its real path, with symbolic links resolved).
// A .git that is a symbolic link fails the run (the command could have
// made it, and a bind would follow it); so does any other path returned
// here that is or lies below a symbolic link (Bwrap.Command checks).
//
// apply_patch for a sandboxed agent refuses the same paths.
func GitProtected(ws, access string) ([]string, error) {
	var out []string
	add := func(rel string) {
		if !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	gitdir := func(rel string) {
		if access != "rw" {
			add(rel)
			return
		}
		for _, g := range gitDirsIn(ws, rel) {
			placeholders(filepath.Join(ws, g))
			for _, m := range GitMembers {
				if _, err := os.Lstat(filepath.Join(ws, g, m)); err == nil {
					add(filepath.Join(g, m))
				}
			}
		}
	}
	wsReal, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return nil, err
	}
	dirs := 0
	err = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == ws {
				return err
			}
			return nil // unreadable: nothing to protect there
		}
		rel, _ := filepath.Rel(ws, p)
		if d.Name() == ".git" && p != ws {
			switch t := d.Type(); {
			case t&fs.ModeSymlink != 0:
				return fmt.Errorf("%s is a symbolic link; remove it on the host (a repository's .git must be a directory or a gitdir: file)", p)
			case t.IsDir():
				gitdir(rel)
				return filepath.SkipDir
			case t.IsRegular():
				add(rel)
				// The target as the host's git reaches it, through any
				// symbolic link the command made on the way: what lies
				// outside the workspace is not in the sandbox at all.
				if target, ok := gitFileTarget(p); ok {
					if real, err := filepath.EvalSymlinks(target); err == nil {
						if trel, inside := within(wsReal, real); inside && trel != "." {
							if fi, err := os.Lstat(real); err == nil && fi.IsDir() {
								gitdir(trel)
							}
						}
					}
				}
			}
			return nil
		}
		if d.IsDir() {
			if rel != "." && strings.Count(rel, "/") >= gitSearchDepth {
				return filepath.SkipDir
			}
			if dirs++; dirs > gitSearchDirs {
				return filepath.SkipAll
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A git directory below another is covered by it.
	slices.Sort(out)
	return out, nil
}

// gitDirsIn returns rel and the submodule and linked worktree git
// directories below it (modules/**, worktrees/*: directories holding a
// HEAD).
func gitDirsIn(ws, rel string) []string {
	out := []string{rel}
	for _, sub := range []string{"modules", "worktrees"} {
		root := filepath.Join(ws, rel, sub)
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || p == root {
				return nil
			}
			if strings.Count(p[len(root):], "/") > 8 {
				return filepath.SkipDir
			}
			if fi, err := os.Lstat(filepath.Join(p, "HEAD")); err == nil && !fi.IsDir() {
				r, _ := filepath.Rel(ws, p)
				out = append(out, gitDirsIn(ws, r)...)
				return filepath.SkipDir
			}
			return nil
		})
	}
	return out
}

// gitFileTarget reads the "gitdir: X" line of a .git file; X relative to
// the file's directory.
func gitFileTarget(p string) (string, bool) {
	b, err := os.ReadFile(p)
	if err != nil || len(b) > 4096 {
		return "", false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	v, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "gitdir:")
	if !ok {
		return "", false
	}
	v = strings.TrimSpace(v)
	if !filepath.IsAbs(v) {
		v = filepath.Join(filepath.Dir(p), v)
	}
	return filepath.Clean(v), true
}

// placeholders gives a git directory the members that git reads as code
// when they are missing and an empty one means the same as none, so they
// can be mounted read-only: hooks/ (git init makes it too), and
// config.worktree when the configuration turns it on. commondir cannot
// get one (any commondir changes what git does), so gitAccess "rw" leaves
// it open.
func placeholders(g string) {
	if _, err := os.Lstat(filepath.Join(g, "HEAD")); err != nil {
		return
	}
	if _, err := os.Lstat(filepath.Join(g, "hooks")); os.IsNotExist(err) {
		os.Mkdir(filepath.Join(g, "hooks"), 0o755)
	}
	if b, err := os.ReadFile(filepath.Join(g, "config")); err == nil && bytes.Contains(bytes.ToLower(b), []byte("worktreeconfig")) {
		if _, err := os.Lstat(filepath.Join(g, "config.worktree")); os.IsNotExist(err) {
			os.WriteFile(filepath.Join(g, "config.worktree"), nil, 0o644)
		}
	}
}
