//go:build unix

package unixsock

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ownDir checks that dir belongs to this process's user and that its mode
// has none of the bits in deny.
func ownDir(dir string, deny fs.FileMode) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("socket directory %s is owned by uid %d, not %d", dir, st.Uid, os.Getuid())
	}
	if m := fi.Mode().Perm(); m&deny != 0 {
		return fmt.Errorf("socket directory %s has mode %o: others may enter or change it", dir, m)
	}
	return nil
}

// makePrivate makes the staging directory dir reachable by its owner
// only.
func makePrivate(dir string) error { return os.Chmod(dir, 0o700) }

// setMode gives the socket at path its mode.
func setMode(path string, perm fs.FileMode) error { return os.Chmod(path, perm) }
