// Package unixsock creates the private unix sockets of the gateway (the
// engine socket, a node session's control socket) with an explicit mode,
// without ever changing the process umask. Standard library only.
package unixsock

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// maxSocketPath is the longest path a unix socket address holds (the size
// of sun_path less its terminating NUL).
const maxSocketPath = 107

// Listen listens on a new unix socket at path (replacing a stale one)
// whose mode is perm from the moment it can be reached, without touching
// the process umask: the umask belongs to the whole process, and a command
// forked by another goroutine while it is narrowed would inherit it. The
// socket is bound in a fresh private (0700) directory next to path,
// chmodded there and renamed onto path. Where that longer name does not fit
// a socket address, it is bound at path itself, which is allowed only when
// path's directory is ours and private (no one else can reach the socket
// before its chmod). A directory of path that is another user's, or that
// others may write to, is refused. Closing the listener removes path.
func Listen(path string, perm fs.FileMode) (net.Listener, error) {
	dir := filepath.Dir(path)
	// The socket's directory must be ours and writable by no one else:
	// whoever may write to it can unlink the socket and put their own in
	// its place, and our clients would talk to them.
	if err := ownDir(dir, 0o022); err != nil {
		return nil, err
	}
	tmpDir, err := os.MkdirTemp(dir, ".")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmpDir)
	if err := makePrivate(tmpDir); err != nil {
		return nil, err
	}
	bindAt := filepath.Join(tmpDir, "s")
	if len(bindAt) > maxSocketPath && len(path) <= maxSocketPath {
		if err := privateDir(dir, path); err != nil {
			return nil, err
		}
		os.Remove(path)
		bindAt = path
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bindAt, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	if err := setMode(bindAt, perm); err != nil {
		ln.Close()
		os.Remove(bindAt)
		return nil, err
	}
	if bindAt != path {
		if err := os.Rename(bindAt, path); err != nil {
			ln.Close()
			return nil, err
		}
	}
	return &unixListener{UnixListener: ln, path: path}, nil
}

// privateDir checks that dir, the directory of the socket path, belongs to
// this process's user and grants nothing to others.
func privateDir(dir, path string) error {
	if err := ownDir(dir, 0o077); err != nil {
		return fmt.Errorf("socket path %s is too long to bind in a private directory, and %w", path, err)
	}
	return nil
}

// unixListener removes its socket file once, when closed.
type unixListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}
