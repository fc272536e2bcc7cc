//go:build !unix && !windows

package fsutil

// Identity is unknown on this system: ok is always false.
func Identity(path string) (dev, ino uint64, ok bool) { return 0, 0, false }
