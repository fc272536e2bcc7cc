package policy

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// resolver finds executables for one evaluation.
type resolver struct {
	env          Env
	stat         func(string) (fs.FileInfo, error)
	evalSymlinks func(string) (string, error)
	osFS         bool              // Stat and EvalSymlinks are the os ones
	dirReal      map[string]string // realpaths of directories, for this evaluation
}

func newResolver(env Env) *resolver {
	r := &resolver{env: env, stat: env.Stat, evalSymlinks: env.EvalSymlinks}
	if r.stat == nil && r.evalSymlinks == nil {
		r.osFS = true
	}
	if r.stat == nil {
		r.stat = os.Stat
	}
	if r.evalSymlinks == nil {
		r.evalSymlinks = filepath.EvalSymlinks
	}
	return r
}

// realpath is evalSymlinks, faster on the real filesystem: the realpath
// of a file that is not a symlink is the realpath of its directory (kept
// for the evaluation) joined with its name.
func (r *resolver) realpath(p string) (string, error) {
	if !r.osFS {
		return r.evalSymlinks(p)
	}
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
		return r.evalSymlinks(p)
	}
	dir, base := filepath.Split(p)
	d, ok := r.dirReal[dir]
	if !ok {
		if d, err = r.evalSymlinks(dir); err != nil {
			return "", err
		}
		if r.dirReal == nil {
			r.dirReal = map[string]string{}
		}
		r.dirReal[dir] = d
	}
	return filepath.Join(d, base), nil
}

// resolved is the outcome of resolving a command word.
type resolved struct {
	path string      // absolute path, symlinks kept
	real string      // realpath
	info fs.FileInfo // stat of path
	err  string      // why it did not resolve; "" when it did
}

// resolve finds the executable a command word names:
// with a "/" it is absolute or cwd-relative, otherwise it is searched in
// PATH. tilde says the word starts with an unquoted "~".
func (r *resolver) resolve(name string, tilde bool) resolved {
	if name == "" {
		return resolved{err: "empty command name"}
	}
	if tilde {
		p, ok := r.expandTilde(name)
		if !ok {
			return resolved{err: "~ without a home"}
		}
		name = p
	}
	if strings.Contains(name, "/") {
		p, ok := r.abs(name)
		if !ok {
			return resolved{err: "relative path without a working directory"}
		}
		return r.file(p, true)
	}
	for _, dir := range filepath.SplitList(r.env.PATH) {
		if dir == "" {
			dir = "."
		}
		d, ok := r.abs(dir)
		if !ok {
			continue
		}
		if res := r.file(d+"/"+name, true); res.err == "" {
			return res
		}
	}
	return resolved{err: "not found in PATH"}
}

func (r *resolver) expandTilde(p string) (string, bool) {
	home := strings.TrimRight(r.env.Home, "/")
	if r.env.Home == "" {
		return "", false
	}
	if p == "~" {
		if home == "" {
			home = "/"
		}
		return home, true
	}
	return home + p[1:], true
}

// abs makes p absolute against the working directory.
func (r *resolver) abs(p string) (string, bool) {
	if filepath.IsAbs(p) {
		return p, true
	}
	if r.env.Cwd == "" || !filepath.IsAbs(r.env.Cwd) {
		return "", false
	}
	return r.env.Cwd + "/" + p, true
}

// file checks that p is an existing regular file (executable if exec) and
// computes its realpath. A ".." component is applied after resolving the
// symlinks before it, as the kernel does, never lexically.
func (r *resolver) file(p string, exec bool) resolved {
	path, err := r.physical(p)
	if err != nil {
		return resolved{err: "cannot resolve " + p}
	}
	info, err := r.stat(path)
	if err != nil {
		return resolved{err: "no such file"}
	}
	if !info.Mode().IsRegular() {
		return resolved{err: "not a regular file"}
	}
	if exec && info.Mode().Perm()&0o111 == 0 {
		return resolved{err: "not executable"}
	}
	real, err := r.realpath(path)
	if err != nil {
		return resolved{err: "no realpath"}
	}
	return resolved{path: path, real: real, info: info}
}

func (r *resolver) physical(p string) (string, error) {
	if !hasDotDot(p) {
		return filepath.Clean(p), nil
	}
	dir, base := filepath.Split(p)
	if base == "" || base == "." || base == ".." {
		return "", fs.ErrInvalid
	}
	d, err := r.evalSymlinks(dir)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, base), nil
}

// hasDotDot reports whether p has a ".." component.
func hasDotDot(p string) bool {
	for i := strings.Index(p, ".."); i >= 0; {
		end := i + 2
		if (i == 0 || p[i-1] == '/') && (end == len(p) || p[end] == '/') {
			return true
		}
		j := strings.Index(p[i+1:], "..")
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// lexicalTrustedSet returns the trusted directories as written (cleaned),
// without touching the filesystem.
func (r *resolver) lexicalTrustedSet(extra []string) map[string]bool {
	set := make(map[string]bool, len(defaultTrust)+len(extra))
	for _, d := range defaultTrust {
		set[filepath.Clean(d)] = true
	}
	for _, d := range extra {
		d = strings.TrimSpace(d)
		if d == "~" || strings.HasPrefix(d, "~/") {
			p, ok := r.expandTilde(d)
			if !ok {
				continue
			}
			d = p
		}
		if filepath.IsAbs(d) {
			set[filepath.Clean(d)] = true
		}
	}
	return set
}

// trustedSet returns the trusted directories: the defaults
// plus extra, each also by its realpath. Relative entries are ignored.
func (r *resolver) trustedSet(extra []string) map[string]bool {
	set := r.lexicalTrustedSet(extra)
	for d := range set {
		if real, err := r.evalSymlinks(d); err == nil {
			set[real] = true
		}
	}
	return set
}
