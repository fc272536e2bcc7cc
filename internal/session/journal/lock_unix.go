//go:build unix

package journal

import "os"

// syncDir fsyncs the open directory d, making file creations and removals
// in it durable.
func syncDir(d *os.File) error { return d.Sync() }
