package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

func write0600(p string, b []byte) error  { return WriteFile(p, b, 0o600) }
func create0600(p string, b []byte) error { return CreateFile(p, b, 0o600) }

// tinyDisk mounts a small tmpfs (root only; skipped elsewhere).
func tinyDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k,nr_inodes=64,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// exhaust uses up the disk's blocks or its inodes and returns a function
// that gives them back.
func exhaust(t *testing.T, dir, what string) func() {
	t.Helper()
	var made []string
	switch what {
	case "blocks":
		p := filepath.Join(dir, "ballast")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := f.Write(make([]byte, 4096)); err != nil {
				break
			}
		}
		f.Close()
		made = append(made, p)
	case "inodes":
		for i := 0; ; i++ {
			p := filepath.Join(dir, fmt.Sprintf("inode-%d", i))
			f, err := os.Create(p)
			if err != nil {
				break
			}
			f.Close()
			made = append(made, p)
		}
	}
	return func() {
		for _, p := range made {
			os.Remove(p)
		}
	}
}

// TestNoPartialFileOnFullDisk runs each writer against each way a disk
// is full, over an existing file and over none: the write fails, the
// target keeps its old content (or stays absent), and no temporary file
// is left. With space back, the same write succeeds whole.
func TestNoPartialFileOnFullDisk(t *testing.T) {
	dir := tinyDisk(t)
	data := []byte("cop_0123456789012345678901234567890123456789abc\n")
	writers := map[string]func(string, []byte) error{"WriteFile": write0600, "CreateFile": create0600}
	for wname, write := range writers {
		for _, what := range []string{"blocks", "inodes"} {
			for _, existing := range []bool{false, true} {
				if wname == "CreateFile" && existing {
					continue // Create never replaces
				}
				t.Run(fmt.Sprintf("%s/%s/existing=%v", wname, what, existing), func(t *testing.T) {
					p := filepath.Join(dir, "target")
					os.Remove(p)
					if existing {
						if err := os.WriteFile(p, []byte("old\n"), 0o600); err != nil {
							t.Fatal(err)
						}
					}
					free := exhaust(t, dir, what)
					err := write(p, data)
					b, rerr := os.ReadFile(p)
					free()
					if err == nil {
						t.Fatalf("%s on a disk without %s succeeded", wname, what)
					}
					// Callers tell a full disk by the system's error.
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("%s on a disk without %s: %v, want ENOSPC", wname, what, err)
					}
					switch {
					case existing && string(b) != "old\n":
						t.Fatalf("target is %q after a failed %s, want the old content", b, wname)
					case !existing && !errors.Is(rerr, fs.ErrNotExist):
						t.Fatalf("a failed %s left the target %q (%v)", wname, b, rerr)
					}
					if m, _ := filepath.Glob(filepath.Join(dir, ".target.*")); len(m) > 0 {
						t.Fatalf("temporary files left: %v", m)
					}
					if err := write(p, data); err != nil {
						t.Fatalf("%s with space back: %v", wname, err)
					}
					if b, _ := os.ReadFile(p); string(b) != string(data) {
						t.Fatalf("target is %q", b)
					}
					if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
						t.Fatalf("mode %o", fi.Mode().Perm())
					}
				})
			}
		}
	}
}

// TestCreateKeepsExisting: Create never replaces a file.
func TestCreateKeepsExisting(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := CreateFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(p, []byte("two"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Create: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("content %q", b)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".f.*")); len(m) > 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

// TestCheckAborts: a Check error leaves the target and no temporary file,
// and Check sees the complete new content.
func TestCheckAborts(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("refused")
	var seen string
	err := Write(p, []byte("new"), Options{Check: func(tmp string) error {
		b, _ := os.ReadFile(tmp)
		seen = string(b)
		return refuse
	}})
	if !errors.Is(err, refuse) || seen != "new" {
		t.Fatalf("err %v, check saw %q", err, seen)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("content %q", b)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".f.*")); len(m) > 0 {
		t.Fatalf("temporary files left: %v", m)
	}
	if err := Write(p, []byte("new"), Options{Check: func(string) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("content %q", b)
	}
}
