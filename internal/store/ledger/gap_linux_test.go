package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGapOnFullDisk: the same on a real full file system, a small tmpfs (needs root
// or CAP_SYS_ADMIN; skipped otherwise).
func TestGapOnFullDisk(t *testing.T) {
	home := t.TempDir()
	dir := Dir(home)
	os.MkdirAll(dir, 0o700)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	l := openLedger(t, home, Options{})
	appendN(t, l, 3)
	// Fill the file system.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	lost := 0
	for i := range 5 {
		_, err := l.Append(Record{Type: TypeNode, Fields: map[string]any{"action": "pair", "name": strings.Repeat("x", 3000), "i": i}})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append %d on a full disk: %v", i, err)
		}
		lost++
	}
	if rep, _ := Verify(home); !rep.OK || rep.Records != 3 {
		t.Fatalf("verify on a full disk: %s", rep)
	}
	os.Remove(filler)
	if _, err := l.Append(Record{Type: TypeNode, Fields: map[string]any{"action": "after"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(home)
	if err != nil || !rep.OK || rep.Records != 5 || rep.Dropped != int64(lost) || !strings.Contains(rep.Gaps[0].Reason, "no space left") {
		t.Fatalf("verify after space returned: %s %+v %v", rep, rep, err)
	}
}
