//go:build !unix

package journal

import "os"

// lockDir does nothing where flock is not available; the caller must
// ensure a single writer.
func lockDir(*os.File) error { return nil }

// syncDir does nothing where directories cannot be fsynced.
func syncDir(*os.File) error { return nil }
