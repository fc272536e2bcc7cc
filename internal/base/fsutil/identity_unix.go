//go:build unix

package fsutil

import (
	"os"
	"syscall"
)

// Identity returns the device and inode of the file at path (following
// symbolic links); ok is false when it cannot be stat'ed.
func Identity(path string) (dev, ino uint64, ok bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), st.Ino, true
}
