package fsutil

import (
	"errors"
	"os"
)

// ErrLocked reports a lock another open file description holds (TryLock).
var ErrLocked = errors.New("locked by another holder")

// LockFile opens (creating it with mode 0600 if needed) the lock file at
// path and takes an exclusive flock on it, blocking until it is granted.
// Closing the returned file releases the lock.
func LockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := Lock(f, true); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
