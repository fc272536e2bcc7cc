//go:build unix

package registry

import (
	"os"
	"syscall"
	"testing"
)

// inode is the inode number of p.
func inode(t *testing.T, p string) uint64 {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
