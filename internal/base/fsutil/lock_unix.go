//go:build unix

package fsutil

import (
	"errors"
	"os"
	"syscall"
)

// flock calls flock(2) on f with how, retrying when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func lockHow(exclusive bool) int {
	if exclusive {
		return syscall.LOCK_EX
	}
	return syscall.LOCK_SH
}

// Lock takes an exclusive (or shared) flock(2) on the open file f, blocking
// until it is granted. flock locks belong to the open file description: a
// second description of the same file, in this process or another, is
// excluded; closing f (or Unlock) releases the lock.
func Lock(f *os.File, exclusive bool) error {
	if err := flock(f, lockHow(exclusive)); err != nil {
		return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
	return nil
}

// TryLock is Lock without waiting: a lock held elsewhere is reported as
// ErrLocked.
func TryLock(f *os.File, exclusive bool) error {
	err := flock(f, lockHow(exclusive)|syscall.LOCK_NB)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return ErrLocked
	}
	return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
}

// Unlock releases the flock on f.
func Unlock(f *os.File) error {
	if err := flock(f, syscall.LOCK_UN); err != nil {
		return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
	return nil
}
