//go:build unix

package admin

import (
	"io/fs"
	"syscall"
)

// modeBits is true: file modes are how this system keeps others out of
// the home, and Doctor checks them.
const modeBits = true

// noModeBits is the finding where modeBits is false (never here).
const noModeBits = ""

// fileOwner is the uid owning the file fi describes.
func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
