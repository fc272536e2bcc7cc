package patch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// commitHook, if set (tests), runs before each commit step and can fail
// it, to prove the rollback.
var commitHook func(step int, rel string) error

// staged is a target whose new state is being written.
type staged struct {
	t       *target
	tmp     string // temporary file with the new content ("" for a delete)
	bak     string // hard-link backup of the old file ("" if none)
	done    bool   // the rename or unlink happened
	removed bool   // done was a delete
}

// write stages every changed target and commits them.
func (pl *planner) write() error {
	var list []*staged
	for _, t := range pl.order {
		if !t.dirty || !t.existed && !t.exists {
			continue // untouched, or added and deleted again
		}
		list = append(list, &staged{t: t})
	}
	var dirs []string // directories created by stage, parents first
	cleanup := func() {
		for _, s := range list {
			if s.tmp != "" && !s.done {
				pl.root.Remove(s.tmp)
			}
		}
		for i := len(dirs) - 1; i >= 0; i-- {
			pl.root.Remove(dirs[i])
		}
	}

	// Stage: every new content to a temporary file in its directory.
	for _, s := range list {
		if !s.t.exists {
			continue
		}
		created, err := pl.mkdirs(filepath.Dir(s.t.rel))
		dirs = append(dirs, created...)
		if err == nil {
			s.tmp, err = pl.stage(s.t)
		}
		if err != nil {
			cleanup()
			return errorf(CodeIO, "Patch failed at %s: %v; no files were changed.", s.t.display, osErr(err))
		}
	}

	// Back up every file that is replaced or deleted.
	for _, s := range list {
		if !s.t.existed {
			continue
		}
		bak := sibling(s.t.rel, "bak")
		if err := pl.root.Link(s.t.rel, bak); err != nil {
			for _, o := range list {
				if o.bak != "" {
					pl.root.Remove(o.bak)
				}
			}
			cleanup()
			return errorf(CodeIO, "Patch failed at %s: %v; no files were changed.", s.t.display, osErr(err))
		}
		s.bak = bak
	}

	// Commit: renames and unlinks.
	for i, s := range list {
		var err error
		if commitHook != nil {
			err = commitHook(i, s.t.rel)
		}
		if err == nil {
			if s.t.exists {
				err = pl.root.Rename(s.tmp, s.t.rel)
			} else {
				err = pl.root.Remove(s.t.rel)
				s.removed = true
			}
		}
		if err != nil {
			return pl.rollback(list, i, s, err, cleanup)
		}
		s.done = true
	}
	for _, s := range list {
		if s.bak != "" {
			pl.root.Remove(s.bak)
		}
	}
	pl.syncDirs(list)
	return nil
}

// rollback undoes the completed commit steps in reverse order after step
// failed at failed.
func (pl *planner) rollback(list []*staged, failedAt int, failed *staged, cause error, cleanup func()) error {
	var undoFailed []string
	var kept []string
	for i := failedAt - 1; i >= 0; i-- {
		s := list[i]
		var err error
		switch {
		case s.bak != "":
			err = pl.root.Rename(s.bak, s.t.rel)
		default:
			err = pl.root.Remove(s.t.rel)
		}
		if err != nil {
			undoFailed = append(undoFailed, s.t.display)
			if s.bak != "" {
				kept = append(kept, filepath.Join(pl.rootPath, s.bak))
			}
			continue
		}
		if s.bak != "" {
			s.bak = ""
		}
		s.done = false
	}
	// Backups of steps that never ran are not needed.
	for _, s := range list[failedAt:] {
		if s.bak != "" {
			pl.root.Remove(s.bak)
		}
	}
	if len(undoFailed) == 0 {
		cleanup()
		return errorf(CodeIO, "Patch failed at %s: %v; no files were changed.", failed.t.display, osErr(cause))
	}
	var done []string
	for _, s := range list[:failedAt] {
		if !s.done {
			continue
		}
		letter := "M"
		switch {
		case !s.t.existed:
			letter = "A"
		case !s.t.exists:
			letter = "D"
		}
		done = append(done, letter+" "+s.t.display)
	}
	for _, s := range list {
		if s.tmp != "" && !s.done {
			pl.root.Remove(s.tmp)
		}
	}
	msg := fmt.Sprintf("Patch partially applied: %s; failed at %s: %v", strings.Join(done, ", "), failed.t.display, osErr(cause))
	if len(kept) > 0 {
		msg += " (backups kept: " + strings.Join(kept, ", ") + ")"
	}
	return &Error{Code: CodeIO, Message: msg}
}

// mkdirs creates the missing directories of rel and returns them, parents
// first.
func (pl *planner) mkdirs(rel string) ([]string, error) {
	var missing []string
	for d := rel; d != "." && d != "/" && d != ""; d = filepath.Dir(d) {
		if _, err := pl.root.Lstat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		missing = append(missing, d)
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := pl.root.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return created, err
		}
		created = append(created, missing[i])
	}
	return created, nil
}

// stage writes t's new content to a temporary file next to it, fsynced,
// with t's mode (new files: 0644 minus the umask) and, when possible, its
// owner.
func (pl *planner) stage(t *target) (string, error) {
	tmp := sibling(t.rel, "tmp")
	perm := fs.FileMode(0o644)
	if t.existed && !t.isLink {
		perm = 0o600 // set exactly below
	}
	f, err := pl.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			pl.root.Remove(tmp)
		}
	}()
	if t.existed && !t.isLink {
		if err := f.Chmod(t.mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
			return "", err
		}
		if t.uid >= 0 && (t.uid != os.Getuid() || t.gid != os.Getgid()) {
			f.Chown(t.uid, t.gid) // best effort: only root may give files away
		}
	}
	if _, err := f.Write(t.content); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	ok = true
	return tmp, nil
}

// syncDirs fsyncs the directories of the committed targets, best effort.
func (pl *planner) syncDirs(list []*staged) {
	seen := map[string]bool{}
	for _, s := range list {
		d := filepath.Dir(s.t.rel)
		if seen[d] {
			continue
		}
		seen[d] = true
		if f, err := pl.root.Open(d); err == nil {
			f.Sync()
			f.Close()
		}
	}
}

// sibling returns a fresh hidden name next to rel.
func sibling(rel, kind string) string {
	var b [6]byte
	rand.Read(b[:])
	return filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".conch-"+hex.EncodeToString(b[:])+"."+kind)
}
