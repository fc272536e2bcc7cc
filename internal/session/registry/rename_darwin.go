package registry

import (
	"errors"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames from to to unless to exists (EEXIST then), with
// renameatx_np(RENAME_EXCL) (APFS, HFS+). A file system without it
// (ENOTSUP) is reported as EINVAL, the error the caller gives the pool up
// on. Not yet run on macOS.
func renameNoReplace(from, to string) error {
	err := unix.RenameatxNp(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_EXCL)
	if errors.Is(err, unix.ENOTSUP) {
		return unix.EINVAL
	}
	return err
}
