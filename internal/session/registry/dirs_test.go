package registry

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

func newPool(t *testing.T) (*DirPool, string) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	return NewDirPool(home), home
}

// TestDirPoolReuse: a removed session's directory is emptied, pooled,
// and given to the next session (the same inode, under the new id); the
// removed id is quarantined; the release callback runs.
func TestDirPoolReuse(t *testing.T) {
	p, home := newPool(t)
	id, dir, err := p.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	if dir != proto.SessionDir(home, id) {
		t.Fatalf("dir %s for id %s", dir, id)
	}
	os.WriteFile(filepath.Join(dir, "state.json"), []byte("{}"), 0o600)
	ino := inode(t, dir)
	released := false
	if err := p.Remove(id, dir, func() { released = true }); err != nil {
		t.Fatal(err)
	}
	if !released || p.Free() != 1 || !p.Quarantined(id) {
		t.Fatalf("after Remove: released %v, free %d, quarantined %v", released, p.Free(), p.Quarantined(id))
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("removed directory still there: %v", err)
	}
	id2, dir2, err := p.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	if id2 == id {
		t.Fatal("a quarantined id was given again")
	}
	if inode(t, dir2) != ino || p.Free() != 0 {
		t.Fatal("the pooled directory was not reused")
	}
	if ents, _ := os.ReadDir(dir2); len(ents) != 0 {
		t.Fatalf("reused directory not empty: %v", ents)
	}
}

// TestDirPoolAdopt: at start an empty pooled directory is taken back, a
// removal cut short and a non-empty pooled one are deleted.
func TestDirPoolAdopt(t *testing.T) {
	p, home := newPool(t)
	sessions := filepath.Join(home, "sessions")
	os.Mkdir(filepath.Join(sessions, ".free-7"), 0o700)
	os.MkdirAll(filepath.Join(sessions, ".free-8", "x"), 0o700)
	os.MkdirAll(filepath.Join(sessions, ".gone-old", "y"), 0o700)
	for _, n := range []string{".free-7", ".free-8", ".gone-old"} {
		if !IsReserved(n) {
			t.Fatalf("%s not reserved", n)
		}
		p.Adopt(sessions, n)
	}
	if p.Free() != 1 {
		t.Fatalf("pool holds %d, want 1", p.Free())
	}
	for _, n := range []string{".free-8", ".gone-old"} {
		if _, err := os.Stat(filepath.Join(sessions, n)); !os.IsNotExist(err) {
			t.Fatalf("%s kept", n)
		}
	}
	// The next pooled name does not clash with the adopted one.
	id, dir, _ := p.Reserve()
	if err := p.Remove(id, dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sessions, ".free-8")); err != nil {
		t.Fatalf("pooled as %v", err)
	}
}

// TestDirPoolConcurrent: concurrent reservations and removals never give
// one id or directory twice (run with -race).
func TestDirPoolConcurrent(t *testing.T) {
	p, _ := newPool(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	hammer(8, 25, func(int, int) {
		id, dir, err := p.Reserve()
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		dup := seen[id]
		seen[id] = true
		mu.Unlock()
		if dup {
			t.Errorf("id %s given twice", id)
		}
		if err := p.Remove(id, dir, nil); err != nil {
			t.Error(err)
		}
	})
}
