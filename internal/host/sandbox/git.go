package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"
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
// a run: .git entries in the workspace and in directories up to this many
// levels below it, breadth first, reading at most this many directories.
const gitSearchDepth = 4

var gitSearchDirs = 5000 // a variable for the tests

// GitProtected returns the workspace-relative paths a run mounts
// read-only to keep the workspace's repositories from being turned
// against the host's git: every .git directory (access "ro") or its
// GitMembers (access "rw", submodule and worktree directories inside it
// included), every .git file, and a git directory a .git file inside the
// workspace points to (by its real path, with symbolic links resolved),
// and, for each repository found and one the workspace lies in, what
// the host's git reads as its configuration and what that configuration
// names in the workspace as a program or as code (gitconfig.go: asked of
// git itself, missing ones made empty first). It runs git, and may
// create files and directories in the workspace.
// A .git that is a symbolic link fails the run (the command could have
// made it, and a bind would follow it); so does any other path returned
// here that is or lies below a symbolic link (Bwrap.Command checks).
//
// The search has limits, and the command writes the workspace: it could
// make thousands of directories to use them up before a repository is
// reached. So the search goes level by level (the workspace's own .git
// is always found), and with home set it remembers, per workspace, every
// .git it found ($CONCH_HOME/sandboxes/git-seen/): a repository found
// once stays protected while it is there, however the workspace fills
// up. (A found repository cannot be moved from inside: its .git and the
// directories above it are mount points.)
//
// apply_patch for a sandboxed agent refuses the same paths.
func GitProtected(home, ws, access string) ([]string, error) {
	var out []string
	added := map[string]bool{}
	add := func(rel string) {
		if !added[rel] {
			added[rel] = true
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
	if _, err := os.ReadDir(ws); err != nil {
		return nil, err
	}
	// named protects what the host's git reads as configuration for the
	// worktree rel (git directory gd), and what that configuration names
	// in the workspace as a program or as code (gitconfig.go): the
	// directory core.hooksPath names (husky's .husky/_), the files
	// include.path and includeIf.*.path name (whatever their condition
	// says now), a core.fsmonitor or filter driver of the workspace, ….
	// A missing one is made empty first, so it can be mounted (the
	// command could make it otherwise).
	asked := map[string]bool{}
	// namedAt is named for the worktree top (absolute).
	namedAt := func(top, gd string) error {
		if asked[gd] {
			return nil
		}
		asked[gd] = true
		if !gitDirValid(gd) {
			gd = "" // not a repository git uses: the rest of the configuration still applies
		}
		refs, err := gitConfigRefs(top, gd)
		if err != nil {
			return fmt.Errorf("ask git for the configuration of %s: %w", top, err)
		}
		for _, r := range refs {
			prel, inside, err := resolveIn(wsReal, r.path)
			if err != nil && r.soft {
				continue
			}
			if err != nil {
				return fmt.Errorf("the git configuration of %s (%s) names %w", top, r.key, err)
			}
			if !inside {
				continue
			}
			if r.repo {
				// A repository of the workspace a remote names (a bare
				// one the search does not find): protected as a .git is.
				if fi, err := os.Lstat(filepath.Join(wsReal, prel)); err == nil && fi.IsDir() {
					gitdir(prel)
				}
				continue
			}
			if _, err := os.Lstat(filepath.Join(wsReal, prel)); err == nil {
				add(prel)
				continue
			}
			if !r.make {
				continue
			}
			if err := placeholder(wsReal, prel, r.dir); err != nil {
				return fmt.Errorf("the git configuration of %s (%s) names %s: %w", top, r.key, r.path, err)
			}
			add(prel)
		}
		// What a hook manager's hooks run on every commit (husky's
		// .husky/<hook>, pre-commit's and lefthook's configuration):
		// read-only when it is there.
		hooks := []string{}
		if gd != "" {
			hooks = append(hooks, filepath.Join(gd, "hooks"))
		}
		for _, r := range refs {
			if r.dir && GitKeyClass(r.key) == ClassHooks {
				hooks = append(hooks, r.path)
			}
		}
		for _, h := range hooks {
			for _, p := range hookManagerFiles(top, h) {
				prel, inside, err := resolveIn(wsReal, p)
				if err != nil {
					return fmt.Errorf("the hooks of %s (%s) run %w", top, h, err)
				}
				if _, err2 := os.Lstat(filepath.Join(wsReal, prel)); inside && err2 == nil {
					add(prel)
				}
			}
		}
		return nil
	}
	named := func(rel, gd string) error { return namedAt(filepath.Join(ws, rel), gd) }
	var found []string // the .git entries, workspace-relative
	visited := map[string]bool{}
	var visit func(rel string) error
	// submodules protects the submodules the index of the worktree rel
	// (git directory gd) lists, at any depth: the host's `git status`
	// there runs `git status` inside each populated one, so its .git is
	// visited like the workspace's own; one not populated (cloned
	// without --recurse-submodules) has its directory made read-only
	// (with "ro"), or the command could make a repository of its own
	// there and get `git status` to run its fsmonitor.
	// submodulesAt is submodules for the worktree top (absolute), which
	// may lie above the workspace (a checkout the workspace is part of):
	// its submodules inside the workspace.
	submodulesAt := func(top, gd string) error {
		for _, sm := range gitlinks(top, gd) {
			srel, inside := Within(wsReal, filepath.Join(top, sm))
			if !inside || srel == "." {
				continue
			}
			if _, err := os.Lstat(filepath.Join(ws, srel, ".git")); err == nil {
				if err := visit(srel); err != nil {
					return err
				}
				continue
			}
			if access == "rw" {
				continue // registering a submodule is open under "rw" (documented)
			}
			if err := placeholder(wsReal, srel, true); err != nil {
				return fmt.Errorf("the submodule %s of %s: %w", sm, top, err)
			}
			add(srel)
		}
		return nil
	}
	submodules := func(rel, gd string) error { return submodulesAt(filepath.Join(wsReal, rel), gd) }
	// worktrees visits the linked worktrees of the git directory gd that
	// lie in the workspace, at any depth: git runs the hooks of a relative
	// core.hooksPath from each one's top.
	worktrees := func(gd string) error {
		for _, top := range linkedWorktrees(gd) {
			if rel, inside := Within(wsReal, top); inside && rel != "." {
				if err := visit(rel); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// visit looks at the .git entry of the directory rel.
	visit = func(rel string) error {
		g := filepath.Join(rel, ".git")
		if visited[g] {
			return nil
		}
		visited[g] = true
		p := filepath.Join(ws, g)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		switch t := fi.Mode().Type(); {
		case t&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link; remove it on the host (a repository's .git must be a directory or a gitdir: file)", p)
		case t.IsDir():
			found = append(found, g)
			gitdir(g)
			if err := named(rel, p); err != nil {
				return err
			}
			if err := worktrees(p); err != nil {
				return err
			}
			return submodules(rel, p)
		case t.IsRegular():
			found = append(found, g)
			add(g)
			// The target as the host's git reaches it, through any
			// symbolic link the command made on the way: what lies
			// outside the workspace is not in the sandbox at all.
			if target, ok := gitFileTarget(p); ok {
				if real, err := filepath.EvalSymlinks(target); err == nil {
					if trel, inside := Within(wsReal, real); inside && trel != "." {
						if fi, err := os.Lstat(real); err == nil && fi.IsDir() {
							gitdir(trel)
						}
					}
					if err := named(rel, real); err != nil {
						return err
					}
					return submodules(rel, real)
				}
				// A git directory it names that is not there yet: the
				// command could make one (with a core.fsmonitor) for the
				// host's git to use. Made empty and read-only.
				trel, inside, err := resolveIn(wsReal, target)
				if err != nil {
					return fmt.Errorf("%s names %w", p, err)
				}
				if inside {
					if _, err := os.Lstat(filepath.Join(wsReal, trel)); os.IsNotExist(err) {
						if err := placeholder(wsReal, trel, true); err != nil {
							return fmt.Errorf("%s names %s: %w", p, target, err)
						}
						add(trel)
					}
				}
			}
		}
		return nil
	}
	// The workspace may lie inside a repository of the host's (a
	// subdirectory of a checkout): git run there reads that repository's
	// configuration, which can name paths of the workspace.
	if top, gd, ok := enclosingRepo(ws); ok {
		if _, inside := Within(wsReal, gd); !inside {
			if err := namedAt(top, gd); err != nil {
				return nil, err
			}
			if err := submodulesAt(top, gd); err != nil {
				return nil, err
			}
		}
	}
	level, dirs := []string{"."}, 0
	for depth := 0; len(level) > 0; depth++ {
		for _, d := range level {
			if err := visit(d); err != nil {
				return nil, err
			}
		}
		if depth == gitSearchDepth {
			break
		}
		var next []string
	read:
		for _, d := range level {
			ents, err := os.ReadDir(filepath.Join(ws, d))
			if err != nil {
				continue // unreadable: nothing to protect there
			}
			for _, e := range ents {
				if !e.IsDir() || e.Name() == ".git" {
					continue
				}
				if dirs++; dirs > gitSearchDirs {
					break read
				}
				next = append(next, filepath.Join(d, e.Name()))
			}
		}
		level = next
	}
	if home != "" {
		seen, file := loadSeen(home, wsReal)
		for _, g := range seen {
			// Still there, at a real path: a .git of the workspace.
			if filepath.Base(g) != ".git" || RealBelow(ws, g) != nil {
				continue
			}
			if err := visit(filepath.Dir(g)); err != nil {
				return nil, err
			}
		}
		// The entries recorded before first: a command that makes
		// thousands of repositories of its own cannot push the older ones
		// out of the bounded record.
		now := map[string]bool{}
		for _, g := range found {
			now[g] = true
		}
		var keep []string
		for _, g := range seen {
			if now[g] {
				keep = append(keep, g)
				delete(now, g)
			}
		}
		for _, g := range found {
			if now[g] {
				keep = append(keep, g)
			}
		}
		saveSeen(file, wsReal, keep)
	}
	// A git directory below another is covered by it.
	slices.Sort(out)
	return out, nil
}

// hookManagers are the hook managers whose hooks run files of the
// repository on every commit: a marker their hook scripts contain, and
// the files (relative to the repository's top) they run or read as the
// list of commands to run.
var hookManagers = []struct {
	marker string
	files  []string
}{
	{"pre-commit.com", []string{".pre-commit-config.yaml", ".pre-commit-config.yml"}},
	{"File generated by pre-commit", []string{".pre-commit-config.yaml", ".pre-commit-config.yml"}},
	{"lefthook", []string{"lefthook.yml", ".lefthook.yml", "lefthook-local.yml", ".lefthook-local.yml",
		"lefthook.yaml", ".lefthook.yaml", "lefthook.toml", ".lefthook.toml", "lefthook.json", ".lefthook.json", ".lefthook", ".lefthook-local"}},
}

// hookManagerFiles returns what the hooks in the directory hooks run
// from the worktree top besides themselves: husky's layout (a hooks
// directory named _ whose hooks run the file of the same name in the
// directory above: .husky/_/pre-commit runs .husky/pre-commit) gives that
// directory; a hook script of a manager in hookManagers gives its files.
func hookManagerFiles(top, hooks string) []string {
	var out []string
	if filepath.Base(hooks) == "_" {
		out = append(out, filepath.Dir(hooks))
	}
	ents, err := os.ReadDir(hooks)
	if err != nil {
		return out
	}
	seen := map[int]bool{}
	for i, e := range ents {
		if i == 100 || !e.Type().IsRegular() || strings.HasSuffix(e.Name(), ".sample") {
			continue
		}
		b, err := readNoFollow(filepath.Join(hooks, e.Name()))
		if err != nil {
			continue
		}
		for j, m := range hookManagers {
			if !seen[j] && bytes.Contains(b, []byte(m.marker)) {
				seen[j] = true
				for _, f := range m.files {
					out = append(out, filepath.Join(top, f))
				}
			}
		}
	}
	return out
}

// linkedWorktrees returns the tops of the linked worktrees of the git
// directory gd, as its worktrees/*/gitdir files name them (the path of
// each one's .git file), resolved; at most maxGitlinks.
func linkedWorktrees(gd string) []string {
	ents, err := os.ReadDir(filepath.Join(gd, "worktrees"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if len(out) == maxGitlinks {
			break
		}
		b, err := readNoFollow(filepath.Join(gd, "worktrees", e.Name(), "gitdir"))
		if err != nil || len(b) > 4096 {
			continue
		}
		p := strings.TrimSpace(string(b))
		if !filepath.IsAbs(p) || filepath.Base(p) != ".git" {
			continue
		}
		if real, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			out = append(out, real)
		}
	}
	return out
}

// maxGitlinks bounds the submodules read from one index.
const maxGitlinks = 1000

// gitlinks returns the paths of the submodules (gitlinks) the index of
// the worktree top (git directory gd) lists, relative to top; none when
// git cannot read it.
func gitlinks(top, gd string) []string {
	if gitBin() == "" || !gitDirValid(gd) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Reading an index runs core.fsmonitor: a repository the command
	// made (where a submodule is not populated) would run its code here.
	cmd := exec.CommandContext(ctx, gitBin(), "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "ls-files", "--stage", "-z")
	cmd.Dir, cmd.Env = top, append(gitEnv(), "GIT_DIR="+gd, "GIT_WORK_TREE="+top)
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	var paths []string
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if !ok || !strings.HasPrefix(meta, "160000 ") {
			continue
		}
		if paths = append(paths, path); len(paths) == maxGitlinks {
			break
		}
	}
	return paths
}

// maxSeen bounds a workspace's record of the .git entries found (a
// variable for the tests).
var maxSeen = 10000

// loadSeen reads the .git entries found in the workspace wsReal by
// earlier runs, and names the file that records them.
func loadSeen(home, wsReal string) ([]string, string) {
	sum := sha256.Sum256([]byte(wsReal))
	file := filepath.Join(home, "sandboxes", "git-seen", hex.EncodeToString(sum[:12])+".json")
	var rec struct {
		Workspace string   `json:"workspace"`
		Git       []string `json:"git"`
	}
	if b, err := os.ReadFile(file); err == nil && json.Unmarshal(b, &rec) == nil && rec.Workspace == wsReal {
		return rec.Git, file
	}
	return nil, file
}

// saveSeen records the .git entries there now, the oldest first: found
// holds what the record before and this search found. A failure to record is not the
// run's: this run is protected by its own search.
func saveSeen(file, wsReal string, found []string) {
	all := found
	if len(all) > maxSeen {
		all = all[:maxSeen]
	}
	b, _ := json.Marshal(map[string]any{"workspace": wsReal, "git": all})
	if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, b) {
		return
	}
	if os.MkdirAll(filepath.Dir(file), 0o700) != nil {
		return
	}
	fsutil.Write(file, b, fsutil.Options{Perm: 0o600, NoSync: true})
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
	// conch may be root and the command may have made these links: read
	// and create without following one (a linked member fails the run
	// later, in Bwrap.Command).
	if b, err := readNoFollow(filepath.Join(g, "config")); err == nil && bytes.Contains(bytes.ToLower(b), []byte("worktreeconfig")) {
		if f, err := openNoFollow(filepath.Join(g, "config.worktree"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			f.Close()
		}
	}
}

func readNoFollow(p string) ([]byte, error) {
	f, err := openNoFollow(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// placeholder makes the missing workspace-relative directory (dir) or
// empty file rel, and the directories above it, without following a
// symbolic link (conch may be root).
func placeholder(ws, rel string, dir bool) error {
	if dir {
		return mkdirBelow(ws, rel)
	}
	if d := filepath.Dir(rel); d != "." {
		if err := mkdirBelow(ws, d); err != nil {
			return err
		}
	}
	p := filepath.Join(ws, rel)
	f, err := openNoFollow(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	chownLikeParent(p)
	return nil
}

// chownLikeParent gives p the owner of its directory when conch is root.
func chownLikeParent(p string) {
	if os.Geteuid() != 0 {
		return
	}
	if up, err := os.Lstat(filepath.Dir(p)); err == nil {
		if uid, gid, ok := fileOwner(up); ok {
			os.Lchown(p, uid, gid)
		}
	}
}

// mkdirBelow makes the workspace-relative directory rel and the missing
// ones above it, refusing symbolic links on the way (conch may be root).
func mkdirBelow(ws, rel string) error {
	cur := ws
	for _, part := range strings.Split(filepath.Clean(rel), "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if os.IsNotExist(err) {
			if err := os.Mkdir(cur, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			chownLikeParent(cur) // not root's, with a root gateway
			fi, err = os.Lstat(cur)
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory (a symbolic link?); remove it on the host", cur)
		}
	}
	return nil
}
