//go:build !unix

package fsutil

import "os"

// Lock does nothing where flock is not available; the caller must ensure a
// single writer.
func Lock(*os.File, bool) error { return nil }

// TryLock does nothing where flock is not available.
func TryLock(*os.File, bool) error { return nil }

// Unlock does nothing where flock is not available.
func Unlock(*os.File) error { return nil }
