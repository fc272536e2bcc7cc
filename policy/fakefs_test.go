package policy

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"time"
)

// fakeFS is an in-memory filesystem for resolution tests: regular files
// with a mode, directories and symlinks.
type fakeFS struct {
	entries map[string]fakeEntry
}

type fakeEntry struct {
	mode fs.FileMode // permission bits for files
	dir  bool
	link string // symlink target (absolute or relative to the link's dir)
}

func newFakeFS() *fakeFS {
	f := &fakeFS{entries: map[string]fakeEntry{"/": {dir: true}}}
	return f
}

func (f *fakeFS) mkdirs(p string) {
	for p != "/" && p != "." {
		if _, ok := f.entries[p]; !ok {
			f.entries[p] = fakeEntry{dir: true}
		}
		p = path.Dir(p)
	}
}

// exe adds executable files (mode 0755).
func (f *fakeFS) exe(paths ...string) *fakeFS {
	for _, p := range paths {
		f.mkdirs(path.Dir(p))
		f.entries[p] = fakeEntry{mode: 0o755}
	}
	return f
}

// file adds a regular file with the given mode.
func (f *fakeFS) file(p string, mode fs.FileMode) *fakeFS {
	f.mkdirs(path.Dir(p))
	f.entries[p] = fakeEntry{mode: mode}
	return f
}

func (f *fakeFS) dir(p string) *fakeFS {
	f.mkdirs(p)
	return f
}

func (f *fakeFS) symlink(p, target string) *fakeFS {
	f.mkdirs(path.Dir(p))
	f.entries[p] = fakeEntry{link: target}
	return f
}

var errNotExist = fs.ErrNotExist

// EvalSymlinks resolves p component by component, like
// filepath.EvalSymlinks.
func (f *fakeFS) EvalSymlinks(p string) (string, error) {
	return f.eval(p, 0)
}

func (f *fakeFS) eval(p string, depth int) (string, error) {
	if depth > 40 {
		return "", errors.New("too many links")
	}
	if !strings.HasPrefix(p, "/") {
		return "", errors.New("relative path")
	}
	cur := "/"
	comps := strings.Split(p, "/")
	for _, c := range comps {
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		e, ok := f.entries[next]
		if !ok {
			return "", errNotExist
		}
		if e.link != "" {
			t := e.link
			if !strings.HasPrefix(t, "/") {
				t = path.Join(cur, t)
			}
			r, err := f.eval(t, depth+1)
			if err != nil {
				return "", err
			}
			cur = r
			continue
		}
		if !e.dir && next != path.Clean(p) {
			// a file in the middle of the path
			if c != comps[len(comps)-1] {
				return "", errors.New("not a directory")
			}
		}
		cur = next
	}
	return cur, nil
}

func (f *fakeFS) Stat(p string) (fs.FileInfo, error) {
	r, err := f.eval(p, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	e := f.entries[r]
	return fakeInfo{name: path.Base(r), e: e, size: int64(len(r))}, nil
}

func (f *fakeFS) env(pathList, cwd, home string) Env {
	return Env{PATH: pathList, Cwd: cwd, Home: home, Stat: f.Stat, EvalSymlinks: f.EvalSymlinks}
}

type fakeInfo struct {
	name string
	e    fakeEntry
	size int64
}

func (i fakeInfo) Name() string { return i.name }
func (i fakeInfo) Size() int64  { return i.size }
func (i fakeInfo) Mode() fs.FileMode {
	if i.e.dir {
		return fs.ModeDir | 0o755
	}
	return i.e.mode
}
func (i fakeInfo) ModTime() time.Time { return time.Unix(1700000000, 0) }
func (i fakeInfo) IsDir() bool        { return i.e.dir }
func (i fakeInfo) Sys() any           { return nil }

// stdFS is the fake host most tests use: a Debian-like /usr/bin with /bin
// a symlink to it.
func stdFS() *fakeFS {
	f := newFakeFS()
	bins := []string{
		"echo", "git", "curl", "head", "tail", "wc", "cut", "uniq", "tr", "sort", "grep", "jq", "cat", "ls", "rm",
		"bash", "dash", "zsh", "ksh", "mksh", "env", "nice", "nohup", "stdbuf", "timeout", "xargs", "sudo", "doas",
		"su", "chroot", "nsenter", "unshare", "setsid", "taskset", "ionice", "chrt", "pkexec", "runuser",
		"python3.11", "node", "perl", "ruby", "php", "lua5.4", "deno", "bun", "busybox", "find", "awk", "sed",
		"cd", "command", "read", "printf", "true", "time", "watch", "g++", "HEAD", "ssh", "wget", "nc",
	}
	for _, b := range bins {
		f.exe("/usr/bin/" + b)
	}
	f.symlink("/bin", "usr/bin")
	f.symlink("/usr/bin/sh", "dash")
	f.symlink("/usr/bin/python3", "python3.11")
	f.symlink("/usr/bin/python", "python3.11")
	f.symlink("/usr/bin/lua", "lua5.4")
	f.exe("/usr/local/bin/rg", "/opt/homebrew/bin/rg", "/home/u/Projects/x/bin/rg", "/home/u/bin/tool")
	f.file("/usr/bin/notexec", 0o644)
	f.file("/home/u/scripts/build.sh", 0o644)
	f.file("/home/u/proj/run.sh", 0o755)
	f.dir("/home/u/proj")
	f.dir("/tmp")
	return f
}

const stdPATH = "/usr/local/bin:/usr/bin:/bin"

// stdRequest is an allowlist-mode request on the fake host with a
// permissive allowlist for echo and git and the default safe bins.
func stdRequest(cmd string) Request {
	return Request{
		Command:   cmd,
		Security:  SecurityAllowlist,
		Ask:       AskOnMiss,
		Allowlist: []AllowEntry{{Pattern: "/usr/bin/echo"}, {Pattern: "/usr/bin/git"}},
		Env:       stdFS().env(stdPATH, "/home/u/proj", "/home/u"),
	}
}
