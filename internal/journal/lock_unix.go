//go:build unix

package journal

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive, non-blocking flock on the open directory d.
func lockDir(d *os.File) error {
	for {
		err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return ErrLocked
		}
		return &os.PathError{Op: "flock", Path: d.Name(), Err: err}
	}
}

// syncDir fsyncs the open directory d, making file creations and removals
// in it durable.
func syncDir(d *os.File) error { return d.Sync() }
