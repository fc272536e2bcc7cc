//go:build !unix

package journal

import "os"

// syncDir does nothing where directories cannot be fsynced.
func syncDir(*os.File) error { return nil }
