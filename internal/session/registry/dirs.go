package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/session/slug"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// Session directories are reused. A foreground exec that ends at once
// writes nothing in its directory (proto.Spec.State), so the
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
	// MaxFreeDirs bounds the pool.
	MaxFreeDirs = 256
	// IDQuarantine is how long an id is not reused after its session is
	// removed. A host writes nothing for a session 250 ms after its end,
	// and drops it within 2 s.
	IDQuarantine = 10 * time.Second
)

// DirPool reserves session ids and their directories in one home, and
// holds the emptied directories of removed sessions for reuse, and the ids
// freed lately. Create it with NewDirPool.
type DirPool struct {
	home string

	mu       sync.Mutex // guards the fields below
	free     []string   // empty directories, sessions/.free-<n>, oldest first
	next     int        // for the next free name
	disabled bool       // renameat2(RENAME_NOREPLACE) is not supported here

	// freed holds the ids of sessions removed in the last IDQuarantine,
	// which are not given again meanwhile: the supervisor of the old
	// session may still hold it (its host's table, its cgroup
	// conch-<id>-<pid>, a late write by path).
	freed     map[string]time.Time
	freedList []string // in the order freed, for pruning
}

// NewDirPool returns an empty pool for the sessions of home
// (home/sessions, proto.SessionDir).
func NewDirPool(home string) *DirPool { return &DirPool{home: home} }

// take returns the oldest pooled directory ("" when there is none): the
// one least likely to be touched by the session it last served.
func (p *DirPool) take() string {
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
func (p *DirPool) giveBack(d string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append([]string{d}, p.free...)
}

// disable stops pooling (the file system cannot rename without
// replacing).
func (p *DirPool) disable() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.disabled = true
}

// adopt pools dir, the empty .free-<n> left by an earlier engine, keeping
// its name; it reports false when the pool is full.
func (p *DirPool) adopt(dir string, n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) >= MaxFreeDirs {
		return false
	}
	p.free = append(p.free, dir)
	p.next = max(p.next, n) // later names do not clash
	return true
}

// Free returns the number of pooled directories.
func (p *DirPool) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

// Quarantined reports whether id was freed lately.
func (p *DirPool) Quarantined(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.freed[id]
	return ok && time.Since(at) < IDQuarantine
}

// forget records that id's session was removed now.
func (p *DirPool) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for len(p.freedList) > 0 {
		old := p.freedList[0]
		if at, ok := p.freed[old]; ok && now.Sub(at) < IDQuarantine {
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
func (p *DirPool) put(sessions, dir string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.disabled && len(p.free) < MaxFreeDirs {
		p.next++
		free := filepath.Join(sessions, fmt.Sprintf("%s%d", freePrefix, p.next))
		if os.Rename(dir, free) == nil {
			p.free = append(p.free, free)
			return
		}
	}
	os.Remove(dir)
}

// Reserve reserves a new session id and returns it with its directory:
// the directory is created exclusively (a pooled directory renamed
// without replacing anything, or a new one), so two calls never share
// one, and no id freed in the last IDQuarantine is given.
func (p *DirPool) Reserve() (id, dir string, err error) {
	var mkErr error
	id = slug.New(func(c string) bool {
		if p.Quarantined(c) {
			return true
		}
		d := proto.SessionDir(p.home, c)
		if free := p.take(); free != "" {
			err := renameNoReplace(free, d)
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
			case errors.Is(err, syscall.EEXIST):
				p.giveBack(free)
				return true
			case errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS):
				p.disable()
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

// Remove deletes the session directory dir of session id and pools it.
// The directory is first renamed out of the way (a dot name listings
// skip), so a supervisor writing by path (a host's late exit.json) cannot
// put a file in it meanwhile; then released is called (nil: nothing to
// tell), and the directory is emptied and pooled. The id is quarantined.
func (p *DirPool) Remove(id, dir string, released func()) error {
	p.forget(id)
	sessions := filepath.Dir(dir)
	gone := filepath.Join(sessions, trashPrefix+filepath.Base(dir))
	err := os.Rename(dir, gone)
	// Released after the rename: an engine that dies in between leaves a
	// directory the host still writes the end state into.
	if released != nil {
		released()
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return os.RemoveAll(dir)
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
	p.put(sessions, gone)
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

// IsReserved reports whether name, an entry of the sessions directory,
// belongs to the pool (a dot name) rather than to a session.
func IsReserved(name string) bool { return strings.HasPrefix(name, ".") }

// Adopt handles a dot-named entry of the sessions directory at start: a
// removal cut short is finished, an empty pooled directory is taken back.
func (p *DirPool) Adopt(sessions, name string) {
	d := filepath.Join(sessions, name)
	if n, err := strconv.Atoi(strings.TrimPrefix(name, freePrefix)); err == nil && strings.HasPrefix(name, freePrefix) {
		if ents, err := os.ReadDir(d); err == nil && len(ents) == 0 && p.adopt(d, n) {
			return
		}
	}
	os.RemoveAll(d)
}
