package registry

import (
	"errors"
	"syscall"

	"golang.org/x/sys/windows"
)

// renameNoReplace renames from to to unless to exists (EEXIST then):
// MoveFileEx without MOVEFILE_REPLACE_EXISTING never replaces. Not yet
// run on Windows.
func renameNoReplace(from, to string) error {
	f, err := windows.UTF16PtrFromString(from)
	if err != nil {
		return err
	}
	t, err := windows.UTF16PtrFromString(to)
	if err != nil {
		return err
	}
	err = windows.MoveFileEx(f, t, 0)
	if errors.Is(err, windows.ERROR_ALREADY_EXISTS) || errors.Is(err, windows.ERROR_FILE_EXISTS) {
		return syscall.EEXIST
	}
	return err
}
