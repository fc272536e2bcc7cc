//go:build unix

package patch

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestModeAndOwner: an updated file keeps its mode; a new file gets 0644
// minus the umask.
func TestModeAndOwner(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "run.sh"), "echo a\n")
	os.Chmod(filepath.Join(ws, "run.sh"), 0o751)
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	_, err := Apply(context.Background(), "*** Begin Patch\n*** Update File: run.sh\n-echo a\n+echo b\n*** Add File: new/n.txt\n+n\n*** End Patch", Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "run.sh")); fi.Mode().Perm() != 0o751 {
		t.Errorf("run.sh mode %v", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(ws, "new", "n.txt")); fi.Mode().Perm() != 0o640 {
		t.Errorf("n.txt mode %v", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(ws, "new")); fi.Mode().Perm() != 0o750 {
		t.Errorf("new/ mode %v", fi.Mode())
	}
	leftovers(t, ws)
}
