package patch

import (
	"path/filepath"
	"runtime"
	"strings"
)

// pathRules are the path rules of a system, as plain string functions so
// that Windows paths are tested on every system (path/filepath follows
// the system it runs on): the separator, whether file names fold case,
// and whether paths have volumes (a drive letter "C:", a share
// "\\server\share").
type pathRules struct {
	sep     byte
	fold    bool
	volumes bool
}

var (
	unixRules    = pathRules{sep: '/'}
	windowsRules = pathRules{sep: '\\', fold: true, volumes: true}
	// hostRules are this system's.
	hostRules = map[bool]pathRules{false: unixRules, true: windowsRules}[runtime.GOOS == "windows"]
)

// volume is p's volume: "C:" for a drive, `\\server\share` for a share
// (either separator), "" for none (and always on Unix).
func (r pathRules) volume(p string) string {
	if !r.volumes {
		return ""
	}
	if len(p) >= 2 && p[1] == ':' && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z') {
		return p[:2]
	}
	isSep := func(c byte) bool { return c == '\\' || c == '/' }
	if len(p) < 3 || !isSep(p[0]) || !isSep(p[1]) || isSep(p[2]) {
		return ""
	}
	// \\server\share: up to the end of the second component.
	n := 0
	for i := 2; i < len(p); i++ {
		if isSep(p[i]) {
			if n++; n == 2 {
				return p[:i]
			}
		}
	}
	if n == 1 {
		return p
	}
	return ""
}

// root is the root of the file system holding the clean absolute path
// p: "/" on Unix, the volume's root (`C:\`, `\\server\share\`) on
// Windows.
func (r pathRules) root(p string) string { return r.volume(p) + string(r.sep) }

// same reports whether a and b name the same path (by case, where names
// fold case).
func (r pathRules) same(a, b string) bool {
	if r.fold {
		return strings.EqualFold(a, b)
	}
	return a == b
}

// within reports whether p is root or below it (both clean and
// absolute).
func (r pathRules) within(root, p string) bool {
	if r.fold {
		root, p = strings.ToLower(root), strings.ToLower(p)
	}
	if strings.HasSuffix(root, string(r.sep)) { // "/", `C:\`
		return strings.HasPrefix(p, root)
	}
	return p == root || strings.HasPrefix(p, root+string(r.sep))
}

// within reports whether p is root or below it (both clean and absolute)
// on this system.
func within(root, p string) bool { return hostRules.within(root, p) }

// isFSRoot reports whether the clean path p is the root of its file
// system ("/", `C:\`): where climbing up ends.
func isFSRoot(p string) bool { return filepath.Dir(p) == p }
