//go:build unix

package approvals

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile opens (creating it 0600 if needed) the lock file at path and takes an exclusive
// flock(2) on it, blocking until it is granted. The lock is released by closing the
// returned file. flock locks belong to the open file description, so two lockFile calls in
// one process exclude each other just as two processes do.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	return f, nil
}

// syncDir fsyncs the directory at path, making renames and creations in it durable.
func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
