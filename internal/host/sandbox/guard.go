package sandbox

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conchsh/conch/internal/base/fsutil"
)

// A read-only mount is the protection; Guard is the second line behind
// it. Before a run it records the protected paths below the workspace
// (files by content, directories by their entries, links by target); a
// git directory is recorded by the members git reads as code
// (GitMembers, in it and in its submodule and worktree directories), not
// by its objects. After the run Check compares: what changed is put
// back as it was, what is new is removed, and the run's result says so.
// What the command wrote there is kept in a quarantine directory of the
// conch home for the user to look at.

// Limits of a Guard's record: entries walked, and bytes of content kept
// to restore (a file beyond them is recorded by its hash only; a change
// to it is removed, not restored). Variables for the tests.
var (
	guardMaxEntries = 20000
	guardMaxBytes   = int64(32 << 20)
	guardFileMax    = int64(4 << 20)
)

// Guard is the record of one run's protected paths. Its zero value is
// not usable; NewGuard makes one. Check is called once, after the run.
type Guard struct {
	ws      string
	roots   []string
	entries map[string]guardEntry // workspace-relative path → what was there
	// anchors are the directories below the workspace on the way to
	// each root (.git for .git/config, tools and tools/hooks for
	// tools/hooks/pre-commit) and their modes: a run that renames one
	// and leaves a link or a gitdir: file in its place would move what
	// git reads out of the walk (and out of restore's reach).
	anchors map[string]fs.FileMode
}

type guardEntry struct {
	mode fs.FileMode
	sum  [32]byte // content (file) or target (link)
	data []byte   // the content, to restore it (nil: not kept)
	kept bool
	uid  int
	gid  int
}

// NewGuard records the paths rels (workspace-relative, as the backend
// mounts them read-only) below the workspace ws.
func NewGuard(ws string, rels []string) *Guard { return NewGuardFor(ws, rels, true) }

// NewGuardFor is NewGuard for a backend that does (mountsReadOnly) or
// does not (landlock) mount the protected paths read-only. Without such
// mounts the run could also register a submodule in the index or leave a
// rebase in progress: a git directory protected whole (gitAccess "ro")
// is then recorded with its gitReadOnlyState too. With them that state is
// not the run's to change, but the user's own `git add` on the host
// during a long run is, so it is not recorded.
func NewGuardFor(ws string, rels []string, mountsReadOnly bool) *Guard {
	g := &Guard{ws: ws, entries: map[string]guardEntry{}, anchors: map[string]fs.FileMode{}}
	for _, r := range rels {
		// A git directory protected whole (gitAccess "ro") by a backend
		// that cannot mount it read-only: what git keeps between
		// commands that makes it run code is recorded too.
		whole := !mountsReadOnly && gitDirValid(filepath.Join(ws, r))
		// A member of a git directory (gitAccess "rw" mounts them one
		// by one) stands for all of them: a commondir that was missing
		// is checked too.
		if slices.Contains(GitMembers, filepath.Base(r)) && gitDirValid(filepath.Join(ws, filepath.Dir(r))) {
			r = filepath.Dir(r)
		}
		for _, x := range guardRoots(ws, r, whole) {
			if !slices.Contains(g.roots, x) {
				g.roots = append(g.roots, x)
			}
		}
	}
	for _, r := range g.roots {
		for d := filepath.Dir(r); d != "." && d != "/"; d = filepath.Dir(d) {
			if fi, err := os.Lstat(filepath.Join(ws, d)); err == nil && fi.IsDir() && RealBelow(ws, d) == nil {
				g.anchors[d] = fi.Mode()
			}
		}
	}
	var kept int64
	n := 0
	g.walk(func(rel string, fi fs.FileInfo) bool {
		if n++; n > guardMaxEntries {
			return false
		}
		e := describe(filepath.Join(ws, rel), fi)
		// An index is kept whole up to the total (a big repository's
		// is larger than guardFileMax; removing it would lose what the
		// user staged).
		if fi.Mode().IsRegular() && (fi.Size() <= guardFileMax || filepath.Base(rel) == "index") && kept+fi.Size() <= guardMaxBytes {
			if b, err := readNoFollow(filepath.Join(ws, rel)); err == nil && sha256.Sum256(b) == e.sum {
				e.data, e.kept = b, true
				kept += int64(len(b))
			}
		}
		g.entries[rel] = e
		return true
	})
	return g
}

// guardRoots returns what of the protected path rel a Guard records: a
// git directory's members, else rel itself.
//
// For a git directory protected whole (whole), its gitReadOnlyState is
// recorded too: a backend that cannot mount it read-only (landlock)
// would otherwise keep a submodule the run registered in the index (the
// host's `git status` runs inside it) or a rebase whose todo list has
// exec lines.
func guardRoots(ws, rel string, whole bool) []string {
	if !gitDirValid(filepath.Join(ws, rel)) {
		return []string{rel}
	}
	var out []string
	for _, g := range gitDirsIn(ws, rel) {
		for _, m := range GitMembers {
			out = append(out, filepath.Join(g, m))
		}
		if whole {
			for _, m := range gitReadOnlyState {
				out = append(out, filepath.Join(g, m))
			}
		}
	}
	return out
}

// gitReadOnlyState are the members of a git directory, besides
// GitMembers, that a Guard records when the directory is protected whole
// (gitAccess "ro"): the index (which lists submodules) and the state of
// a rebase, cherry-pick or am in progress.
var gitReadOnlyState = []string{"index", "rebase-merge", "rebase-apply", "sequencer"}

// walk calls f for every path below the roots, each root first, without
// following links; f returns false to stop.
func (g *Guard) walk(f func(rel string, fi fs.FileInfo) bool) {
	for _, r := range g.roots {
		// A root that is a link is recorded as one (Walk does not
		// follow it); one below a link is not there for git either.
		if RealBelow(g.ws, filepath.Dir(r)) != nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(g.ws, r)); err != nil {
			continue
		}
		stop := false
		filepath.Walk(filepath.Join(g.ws, r), func(p string, fi fs.FileInfo, err error) error {
			if err != nil || stop {
				return nil
			}
			rel, _ := Within(g.ws, p)
			if !f(rel, fi) {
				stop = true
				return filepath.SkipAll
			}
			return nil
		})
		if stop {
			return
		}
	}
}

// describe hashes what is at p (fi its Lstat).
func describe(p string, fi fs.FileInfo) guardEntry {
	e := guardEntry{mode: fi.Mode()}
	if uid, gid, ok := fileOwner(fi); ok {
		e.uid, e.gid = uid, gid
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, _ := os.Readlink(p)
		e.sum = sha256.Sum256([]byte(t))
	case fi.Mode().IsRegular():
		if f, err := openNoFollow(p, os.O_RDONLY, 0); err == nil {
			h := sha256.New()
			io.Copy(h, f)
			f.Close()
			copy(e.sum[:], h.Sum(nil))
		}
	}
	return e
}

// Change is one protected path a run changed, and what Check did.
type Change struct {
	Path   string // workspace-relative
	What   string // "changed", "added", "removed"
	Action string // "restored", "removed", "could not restore: …"
}

// Check compares the protected paths with the record, puts back what
// changed (removing what was added), and returns the changes. What the
// run left there is copied below the directory quarantine first (made
// 0700 when needed) (when it is a small
// file), so nothing the user may have written at the same time is lost.
func (g *Guard) Check(quarantine string) []Change {
	// A directory on the way to a protected path that is now something
	// else (a link to where the run moved it, a gitdir: file, a file) is
	// removed and made again, empty, so what was recorded below it is
	// put back there and git finds nothing the run left. One that is
	// gone is made again too.
	var changes []Change
	anchors := slices.Collect(maps.Keys(g.anchors))
	slices.SortFunc(anchors, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	for _, d := range anchors {
		p := filepath.Join(g.ws, d)
		fi, err := os.Lstat(p)
		if d := filepath.Dir(d); d != "." && RealBelow(g.ws, d) != nil {
			continue
		}
		if os.IsNotExist(err) {
			// Gone (or below one replaced): made again for what was
			// recorded below it.
			if os.Mkdir(p, g.anchors[d].Perm()) == nil {
				chownLikeParent(p)
			}
			continue
		}
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode().IsRegular() && fi.Size() <= guardFileMax {
			if b, err := readNoFollow(p); err == nil {
				dst := filepath.Join(quarantine, d)
				if os.MkdirAll(filepath.Dir(dst), 0o700) == nil {
					fsutil.Write(dst, b, fsutil.Options{Perm: 0o600, NoSync: true})
				}
			}
		}
		act := "removed"
		if err := os.RemoveAll(p); err != nil {
			act = "could not remove: " + err.Error()
		} else if err := os.Mkdir(p, g.anchors[d].Perm()); err != nil {
			act = "removed; could not make the directory again: " + err.Error()
		} else {
			chownLikeParent(p)
		}
		changes = append(changes, Change{Path: d, What: "replaced by a " + entryKind(fi.Mode()), Action: act})
	}
	now := map[string]fs.FileInfo{}
	g.walk(func(rel string, fi fs.FileInfo) bool {
		now[rel] = fi
		return len(now) <= 2*guardMaxEntries
	})
	var added, changed, removed []string
	for rel, fi := range now {
		old, ok := g.entries[rel]
		if !ok {
			added = append(added, rel)
			continue
		}
		e := describe(filepath.Join(g.ws, rel), fi)
		if e.mode != old.mode || e.sum != old.sum {
			changed = append(changed, rel)
		}
	}
	for rel := range g.entries {
		if _, ok := now[rel]; !ok {
			removed = append(removed, rel)
		}
	}
	if len(changes)+len(added)+len(changed)+len(removed) == 0 {
		return nil
	}
	q := quarantine
	save := func(rel string) {
		p := filepath.Join(g.ws, rel)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > guardFileMax {
			return
		}
		if b, err := readNoFollow(p); err == nil {
			dst := filepath.Join(q, rel)
			if os.MkdirAll(filepath.Dir(dst), 0o700) == nil {
				fsutil.Write(dst, b, fsutil.Options{Perm: 0o600, NoSync: true})
			}
		}
	}
	// Deepest first: what was added goes, with what is inside it.
	slices.SortFunc(added, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, rel := range added {
		save(rel)
		act := "removed"
		if err := os.RemoveAll(filepath.Join(g.ws, rel)); err != nil {
			act = "could not remove: " + err.Error()
		}
		changes = append(changes, Change{Path: rel, What: "added", Action: act})
	}
	// Shallow first: a directory before what it holds.
	restore := append(changed, removed...)
	slices.SortFunc(restore, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	for _, rel := range restore {
		what := "changed"
		if slices.Contains(removed, rel) {
			what = "removed"
		} else {
			save(rel)
		}
		act := "restored"
		if err := g.restore(rel); err != nil {
			act = "could not restore: " + err.Error()
		}
		changes = append(changes, Change{Path: rel, What: what, Action: act})
	}
	slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return changes
}

// restore puts back the recorded entry rel.
func (g *Guard) restore(rel string) error {
	e := g.entries[rel]
	p := filepath.Join(g.ws, rel)
	if err := RealBelow(g.ws, filepath.Dir(rel)); err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if e.mode.IsRegular() && !e.kept && filepath.Base(rel) == "index" {
		return fmt.Errorf("the index was too large to keep; left as the run wrote it (check `git status` and `git diff --cached`)")
	}
	if err == nil && !(fi.IsDir() && e.mode.IsDir()) {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	switch {
	case e.mode.IsDir():
		if err := os.Mkdir(p, e.mode.Perm()); err != nil && !os.IsExist(err) {
			return err
		}
		os.Chmod(p, e.mode.Perm())
	case e.mode&fs.ModeSymlink != 0:
		return fmt.Errorf("a symbolic link is not restored")
	case e.mode.IsRegular() && e.kept:
		// A new file renamed into place: a link left at p is replaced,
		// never followed.
		if err := fsutil.Write(p, e.data, fsutil.Options{Perm: e.mode.Perm()}); err != nil {
			return err
		}
	default:
		return fmt.Errorf("its content was too large to keep; the changed file was removed")
	}
	if os.Geteuid() == 0 {
		os.Lchown(p, e.uid, e.gid)
	}
	return nil
}

// entryKind names what a mode is, for a Change.
func entryKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsRegular():
		return "file"
	}
	return "special file"
}

// ChangesNote is the sentence a run's result carries for changes.
func ChangesNote(cs []Change, quarantine string) string {
	if len(cs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Sandbox: the command changed %d path(s) the sandbox protects (git configuration, hooks, programs git runs); conch put them back:", len(cs))
	for i, c := range cs {
		if i == 20 {
			fmt.Fprintf(&b, " … and %d more", len(cs)-20)
			break
		}
		fmt.Fprintf(&b, " %s (%s, %s);", c.Path, c.What, c.Action)
	}
	fmt.Fprintf(&b, " what it wrote is kept in %s.", quarantine)
	return b.String()
}
