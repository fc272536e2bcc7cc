//go:build unix

package engine

import (
	"os"
	"syscall"
)

// fileIdentity is the device and inode of the file fi (os.Stat of path)
// describes.
func fileIdentity(path string, fi os.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), st.Ino, true
}
