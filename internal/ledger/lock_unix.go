//go:build unix

package ledger

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Open flags that keep the ledger off what someone who can write its directory may put
// there instead of a file: O_NOFOLLOW (a symlink would have the gateway, perhaps root,
// write anywhere) and O_NONBLOCK (a FIFO would block the open forever).
const (
	oNoFollow = unix.O_NOFOLLOW
	oNonBlock = unix.O_NONBLOCK
)

// flock takes an exclusive (or shared) flock(2) on the open file f, blocking until it is
// granted. flock locks belong to the open file description: a second description of the
// same file, in this process or another, is excluded.
func flock(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
		return nil
	}
}

// funlock releases the flock on f.
func funlock(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// syncDir fsyncs the directory at path, making creations and renames in it durable.
func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
