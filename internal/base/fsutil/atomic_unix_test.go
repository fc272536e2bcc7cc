//go:build unix

package fsutil

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestModeIsExplicit: the file gets exactly the mode asked for, whatever
// the umask, for every writer and a spread of modes.
func TestModeIsExplicit(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	for _, perm := range []fs.FileMode{0o600, 0o640, 0o644, 0o400, 0o755} {
		for name, w := range map[string]func(string, []byte, fs.FileMode) error{
			"WriteFile":  WriteFile,
			"CreateFile": CreateFile,
			"NoSync":     func(p string, b []byte, m fs.FileMode) error { return Write(p, b, Options{Perm: m, NoSync: true}) },
		} {
			p := filepath.Join(dir, fmt.Sprintf("%s-%o", name, perm))
			if err := w(p, []byte("x"), perm); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != perm {
				t.Fatalf("%s %o: mode %v (%v)", name, perm, fi.Mode().Perm(), err)
			}
		}
	}
}
