//go:build linux

package landlock

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// EtcRules is what a root run may read of /etc (landlock.go): whole
// directories, single files, and directories that may only be listed.
type EtcRules struct {
	Dirs   []string `json:"dirs"`
	Files  []string `json:"files"`
	Listed []string `json:"listed"`
}

// stamp identifies one stat result: the same stamp means the same inode
// with the same mode, owner, entries (a directory's mtime) and no
// metadata change since (ctime moves on every chmod, chown, rename and
// link count change).
type stamp struct {
	err                   bool
	dev, ino              uint64
	mode, uid, gid        uint32
	ctime, ctimeNs, mtime int64
	mtimeNs               int64
}

func stampOf(fi os.FileInfo, err error) stamp {
	if err != nil {
		return stamp{err: true}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{err: true}
	}
	if uint64(st.Dev) == procDev() {
		// A link into /proc (/etc/mtab -> ../proc/self/mounts) reaches
		// another inode, with the time of its making, in every process
		// and every time the kernel makes it again: only the mode
		// counts, the only thing the walk reads of it.
		return stamp{dev: uint64(st.Dev), mode: st.Mode}
	}
	return stamp{dev: uint64(st.Dev), ino: st.Ino, mode: st.Mode, uid: st.Uid, gid: st.Gid,
		ctime: st.Ctim.Sec, ctimeNs: st.Ctim.Nsec, mtime: st.Mtim.Sec, mtimeNs: st.Mtim.Nsec}
}

// procDev is the device of /proc (none: not mounted).
var procDev = sync.OnceValue(func() uint64 {
	var st unix.Stat_t
	if unix.Stat("/proc", &st) != nil {
		return ^uint64(0)
	}
	return st.Dev
})

// etcWalk records every stat the /etc walk made, so that a later run can
// tell the walk's answer still holds by repeating only the stats: no
// directory was read again, no entry appeared or went (the directories'
// mtimes), no mode, owner or symbolic link target changed (the ctimes and
// inode numbers).
type etcWalk struct {
	stats  map[string]stamp // path -> os.Stat
	lstats map[string]stamp // path -> os.Lstat
	newest int64            // the latest ctime or mtime seen, in ns
}

// etcRacy is how recent a change may be for the walk not to be kept:
// file times come from a coarse clock, so an entry added or removed in
// the same tick as the walk leaves its directory's mtime unchanged.
var etcRacy = time.Second

func (w *etcWalk) stat(p string) (os.FileInfo, error) {
	fi, err := os.Stat(p)
	if w != nil {
		w.stats[p] = w.note(stampOf(fi, err))
	}
	return fi, err
}

func (w *etcWalk) lstat(p string) (os.FileInfo, error) {
	fi, err := os.Lstat(p)
	if w != nil {
		w.lstats[p] = w.note(stampOf(fi, err))
	}
	return fi, err
}

func (w *etcWalk) note(s stamp) stamp {
	w.newest = max(w.newest, s.ctime*1e9+s.ctimeNs, s.mtime*1e9+s.mtimeNs)
	return s
}

// still reports whether every recorded stat gives the same stamp now.
func (w *etcWalk) still() bool {
	for p, s := range w.stats {
		if stampOf(os.Stat(p)) != s {
			return false
		}
	}
	for p, s := range w.lstats {
		if stampOf(os.Lstat(p)) != s {
			return false
		}
	}
	return true
}

// etcReadable walks root (othersRead) and returns what every user may
// read of it.
func etcReadable(root string, w *etcWalk) EtcRules {
	var r EtcRules
	if othersRead(root, 0, &r.Dirs, &r.Files, &r.Listed, w) {
		r.Dirs = append(r.Dirs, root)
	}
	return r
}

var etcCache struct {
	sync.Mutex
	root  string
	walk  *etcWalk
	rules EtcRules
	hits  int // for tests
}

// cachedEtcReadable is etcReadable(root) computed once per process and
// walked again only when a stat of the last walk changed. Checking the
// stats costs a fraction of the walk, which reads every directory and
// stats each entry up to three times. A walk that saw a change less
// than etcRacy before it started is not kept.
func cachedEtcReadable(root string) EtcRules {
	etcCache.Lock()
	defer etcCache.Unlock()
	if etcCache.walk != nil && etcCache.root == root && etcCache.walk.still() {
		etcCache.hits++
		return cloneRules(etcCache.rules)
	}
	start := time.Now()
	w := &etcWalk{stats: map[string]stamp{}, lstats: map[string]stamp{}}
	r := etcReadable(root, w)
	etcCache.root, etcCache.walk, etcCache.rules = root, nil, r
	if w.newest < start.Add(-etcRacy).UnixNano() {
		etcCache.walk = w
	}
	return cloneRules(r)
}

func cloneRules(r EtcRules) EtcRules {
	return EtcRules{Dirs: slices.Clone(r.Dirs), Files: slices.Clone(r.Files), Listed: slices.Clone(r.Listed)}
}

// othersRead reports whether every user may read all of p (a file, or a
// directory and everything below it). When not, it collects what they
// may read: whole directories in dirs, single files in files, and the
// directories that may be listed but hold something closed in listed. A
// symbolic link is judged by its target, without descending into a
// linked directory. w, when not nil, records each stat.
func othersRead(p string, depth int, dirs, files, listed *[]string, w *etcWalk) bool {
	fi, err := w.stat(p)
	if err != nil {
		return false
	}
	perm := fi.Mode().Perm()
	if !fi.IsDir() {
		return perm&0o004 != 0
	}
	if perm&0o005 != 0o005 {
		return false
	}
	if l, err := w.lstat(p); err != nil || l.Mode()&os.ModeSymlink != 0 || depth > 8 {
		return err == nil
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return false
	}
	var d, f, l []string
	all := true
	for _, e := range ents {
		c := filepath.Join(p, e.Name())
		if othersRead(c, depth+1, &d, &f, &l, w) {
			if fi, err := w.stat(c); err == nil && fi.IsDir() {
				d = append(d, c)
			} else {
				f = append(f, c)
			}
		} else {
			all = false
		}
	}
	if all {
		return true
	}
	*dirs = append(*dirs, d...)
	*files = append(*files, f...)
	*listed = append(append(*listed, p), l...)
	return false
}
