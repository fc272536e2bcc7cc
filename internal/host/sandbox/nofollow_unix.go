//go:build unix

package sandbox

import (
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow opens p like os.OpenFile, failing when p itself is a
// symbolic link (conch may be root, and the command may have made it).
func openNoFollow(p string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(p, flag|syscall.O_NOFOLLOW, perm)
}

// fileOwner is the owner of the file fi describes.
func fileOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
