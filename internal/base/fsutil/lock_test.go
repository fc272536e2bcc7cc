package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLockExcludes checks every pair of lock kinds on two descriptions of
// one file: only two shared locks go together, and a release lets the
// other in.
func TestLockExcludes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	for _, first := range []bool{true, false} {
		for _, second := range []bool{true, false} {
			a, err := LockFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !first {
				// Downgrade to shared.
				if err := Lock(a, false); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			err = TryLock(b, second)
			if both := !first && !second; both {
				if err != nil {
					t.Fatalf("shared+shared: %v", err)
				}
			} else if !errors.Is(err, ErrLocked) {
				t.Fatalf("exclusive=%v then exclusive=%v: %v, want ErrLocked", first, second, err)
			}
			// A blocking Lock waits for the release.
			Unlock(b)
			got := make(chan error, 1)
			go func() { got <- Lock(b, true) }()
			if first || second {
				select {
				case err := <-got:
					t.Fatalf("Lock did not wait for the holder: %v", err)
				case <-time.After(50 * time.Millisecond):
				}
			}
			if err := Unlock(a); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			a.Close()
			b.Close()
		}
	}
}

// TestLockFileReleasedOnClose: closing the file LockFile returned lets the
// next holder in.
func TestLockFileReleasedOnClose(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	a, err := LockFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := TryLock(b, true); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock while held: %v", err)
	}
	a.Close()
	if err := TryLock(b, true); err != nil {
		t.Fatalf("TryLock after close: %v", err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file mode %o", fi.Mode().Perm())
	}
}
