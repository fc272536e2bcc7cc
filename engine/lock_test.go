package engine

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestLockHomeWaitsForDeadHolder: a lock whose recorded holder is dead is
// held only by something finishing its exit, and is waited for; a lock
// whose recorded holder runs is refused at once.
func TestLockHomeWaitsForDeadHolder(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) (util-linux) is not installed")
	}
	home := t.TempDir()
	lock := filepath.Join(home, "run", "engine.lock")
	os.MkdirAll(filepath.Dir(lock), 0o700)

	// A holder recorded as a pid that no longer exists; the flock is
	// kept for 300 ms by a stand-in.
	dead := exec.Command("true")
	dead.Run()
	os.WriteFile(lock, []byte(strconv.Itoa(dead.Process.Pid)+" mcp\n"), 0o600)
	holder := exec.Command("flock", lock, "sleep", "0.3")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	waitLocked(t, lock)
	t0 := time.Now()
	f, err := lockHome(home, "test")
	if err != nil {
		t.Fatalf("a dead holder's lock was not waited for: %v", err)
	}
	f.Close()
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}

	// A live holder: refused without waiting.
	live := exec.Command("flock", lock, "sleep", "2")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	waitLocked(t, lock)
	os.WriteFile(lock, []byte(strconv.Itoa(live.Process.Pid)+" serve\n"), 0o600)
	t0 = time.Now()
	if _, err := lockHome(home, "test"); !errors.Is(err, ErrHomeLocked) {
		t.Fatalf("a live holder's lock: %v", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("a live holder was waited for (%v)", d)
	}
}

// waitLocked waits until something holds the flock on path.
func waitLocked(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if exec.Command("flock", "-n", path, "true").Run() != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the stand-in never took the lock")
}
