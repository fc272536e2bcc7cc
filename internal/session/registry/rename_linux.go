package registry

import "golang.org/x/sys/unix"

// renameNoReplace renames from to to unless to exists (EEXIST then);
// EINVAL or ENOSYS: the file system or kernel cannot.
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}
