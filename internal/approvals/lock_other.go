//go:build !unix

package approvals

import "os"

// lockFile opens the lock file at path without locking it: flock is not available here,
// so the caller must ensure a single writer.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

// syncDir does nothing where directories cannot be fsynced.
func syncDir(string) error { return nil }
