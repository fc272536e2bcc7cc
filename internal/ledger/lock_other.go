//go:build !unix

package ledger

import "os"

// Open flags of lock_unix.go; none here.
const (
	oNoFollow = 0
	oNonBlock = 0
)

// flock does nothing where flock is not available; the caller must ensure a single
// appender.
func flock(*os.File, bool) error { return nil }

// funlock does nothing where flock is not available.
func funlock(*os.File) error { return nil }

// syncDir does nothing where directories cannot be fsynced.
func syncDir(string) error { return nil }
