package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/slug"
	"github.com/conchsh/conch/internal/supervisor"
)

// Session directories are reused. A foreground exec that ends at once
// writes nothing in its directory (supervisor.Spec.State), so the
// directory was all it cost the disk; but making and deleting an inode
// per call adds up: on ext4 without a journal every inode made scans
// past those deleted in the last minutes, which under load was a tenth
// of the machine. An emptied directory is renamed into a pool
// (sessions/.free-<n>) and renamed back to the next session's id.

const (
	// trashPrefix names a session directory being deleted, freePrefix an
	// empty one kept for reuse. Session ids never start with a dot.
	trashPrefix = ".gone-"
	freePrefix  = ".free-"
	// maxFreeDirs bounds the pool.
	maxFreeDirs = 256
)

// dirPool holds the reusable directories of one home, and the ids freed
// lately.
type dirPool struct {
	mu       sync.Mutex
	free     []string // empty directories, sessions/.free-<n>, oldest first
	next     int      // for the next free name
	disabled bool     // renameat2(RENAME_NOREPLACE) is not supported here

	// freed holds the ids of sessions removed in the last idQuarantine,
	// which are not given again meanwhile: the supervisor of the old
	// session may still hold it (its host's table, its cgroup
	// conch-<id>-<pid>, a late write by path).
	freed     map[string]time.Time
	freedList []string // in the order freed, for pruning
}

// idQuarantine is how long an id is not reused after its session is
// removed. A host writes nothing for a session 250 ms after its end, and
// drops it within 2 s.
const idQuarantine = 10 * time.Second

// take returns the oldest pooled directory ("" when there is none): the
// one least likely to be touched by the session it last served.
func (p *dirPool) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		return ""
	}
	d := p.free[0]
	p.free = p.free[1:]
	return d
}

// giveBack returns a directory take gave out but that was not used.
func (p *dirPool) giveBack(d string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append([]string{d}, p.free...)
}

// disable stops pooling (the file system cannot rename without
// replacing).
func (p *dirPool) disable() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.disabled = true
}

// adopt pools dir, the empty .free-<n> left by an earlier engine, keeping
// its name; it reports false when the pool is full.
func (p *dirPool) adopt(dir string, n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) >= maxFreeDirs {
		return false
	}
	p.free = append(p.free, dir)
	p.next = max(p.next, n) // later names do not clash
	return true
}

// quarantined reports whether id was freed lately.
func (p *dirPool) quarantined(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.freed[id]
	return ok && time.Since(at) < idQuarantine
}

// forget records that id's session was removed now.
func (p *dirPool) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for len(p.freedList) > 0 {
		old := p.freedList[0]
		if at, ok := p.freed[old]; ok && now.Sub(at) < idQuarantine {
			break
		}
		delete(p.freed, old)
		p.freedList = p.freedList[1:]
	}
	if p.freed == nil {
		p.freed = map[string]time.Time{}
	}
	if _, ok := p.freed[id]; !ok {
		p.freedList = append(p.freedList, id)
	}
	p.freed[id] = now
}

// put adds the empty directory dir to the pool under a free name, or
// deletes it when the pool is full or disabled.
func (p *dirPool) put(sessions, dir string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.disabled && len(p.free) < maxFreeDirs {
		p.next++
		free := filepath.Join(sessions, fmt.Sprintf("%s%d", freePrefix, p.next))
		if os.Rename(dir, free) == nil {
			p.free = append(p.free, free)
			return
		}
	}
	os.Remove(dir)
}

// newID reserves a session id: its directory is created exclusively (a
// pooled directory renamed without replacing anything, or a new one), so
// two calls never share one.
func (e *Engine) newID() (string, string, error) {
	var dir string
	var mkErr error
	id := slug.New(func(c string) bool {
		if e.dirs.quarantined(c) {
			return true
		}
		d := supervisor.SessionDir(e.home, c)
		if free := e.dirs.take(); free != "" {
			err := unix.Renameat2(unix.AT_FDCWD, free, unix.AT_FDCWD, d, unix.RENAME_NOREPLACE)
			switch {
			case err == nil:
				// A late write by path may have landed while it was
				// emptied.
				if emptyDir(d) != nil {
					os.RemoveAll(d)
					break // make one
				}
				dir = d
				return false
			case errors.Is(err, unix.EEXIST):
				e.dirs.giveBack(free)
				return true
			case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS):
				e.dirs.disable()
				os.Remove(free)
			}
			// Otherwise the pooled directory is gone: make one.
		}
		if err := os.Mkdir(d, 0o700); err != nil {
			if !os.IsExist(err) {
				mkErr = err
				return false
			}
			return true
		}
		dir = d
		return false
	})
	if mkErr != nil {
		return "", "", mkErr
	}
	return id, dir, nil
}

// removeSession deletes s's directory, after telling its supervisor host
// (which then writes nothing more there). The directory is first renamed
// out of the way (a dot name listings skip), so a supervisor writing by
// path (a host's late exit.json) cannot put a file in it meanwhile; then
// it is emptied and pooled for the next session.
func (e *Engine) removeSession(s *session) error {
	s.mu.Lock()
	release := s.release
	s.mu.Unlock()
	e.dirs.forget(s.id)
	e.forgetDamage(s.dir)
	sessions := filepath.Dir(s.dir)
	gone := filepath.Join(sessions, trashPrefix+filepath.Base(s.dir))
	err := os.Rename(s.dir, gone)
	// Released after the rename: an engine that dies in between leaves a
	// directory the host still writes the end state into.
	if release != nil {
		release()
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return os.RemoveAll(s.dir)
	}
	err = emptyDir(gone)
	if err != nil {
		// A file made just before the rename (opened by a path looked up
		// earlier) can appear while the directory is emptied.
		time.Sleep(20 * time.Millisecond)
		err = emptyDir(gone)
	}
	if err != nil {
		return os.RemoveAll(gone)
	}
	e.dirs.put(sessions, gone)
	return nil
}

// emptyDir deletes what dir holds, keeping dir.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, en := range ents {
		if err := os.RemoveAll(filepath.Join(dir, en.Name())); err != nil {
			return err
		}
	}
	return nil
}

// adoptDir handles a dot-named entry of sessions/ at start: a removal cut
// short is finished, an empty pooled directory is taken back.
func (e *Engine) adoptDir(sessions, name string) {
	d := filepath.Join(sessions, name)
	if n, err := strconv.Atoi(strings.TrimPrefix(name, freePrefix)); err == nil && strings.HasPrefix(name, freePrefix) {
		if ents, err := os.ReadDir(d); err == nil && len(ents) == 0 && e.dirs.adopt(d, n) {
			return
		}
	}
	os.RemoveAll(d)
}
