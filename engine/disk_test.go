package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
)

// TestDiskStateEachCause drives the home's disk state through each way it
// becomes full (free space below the reserve, no free inodes, a write
// that failed with ENOSPC while statfs still shows room) on a real small
// tmpfs, and checks that exec refuses with disk_full while it lasts and
// runs again once it is over.
func TestDiskStateEachCause(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=400,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	home := filepath.Join(mnt, "home")
	seedLoginCache(home)
	e, err := New(Options{Home: home, SupervisorArgv: []string{os.Args[0], "supervise"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })

	execOK := func(why string) {
		t.Helper()
		r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
		if r.Text != "hi" {
			t.Fatalf("%s: exec: %q", why, r.Text)
		}
	}
	execFull := func(why string) {
		t.Helper()
		r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
		d, ok := r.Details.(*apitype.ErrorDetails)
		if !ok || d.Error.Code != apitype.CodeDiskFull || !strings.Contains(r.Text, "out of disk space") {
			t.Fatalf("%s: exec was not refused with disk_full: %q %+v", why, r.Text, r.Details)
		}
		if ds := e.DiskStatus(); !ds.Full || ds.Reason == "" {
			t.Fatalf("%s: status %+v", why, ds)
		}
	}
	execOK("empty disk")
	if ds := e.DiskStatus(); ds.Full || ds.ReserveBytes != 8<<20/10 {
		t.Fatalf("status %+v, want not full with the reserve a tenth of 8 MiB", ds)
	}

	causes := []struct {
		name string
		make func() (undo func())
	}{
		{"below the reserve", func() func() {
			var st syscall.Statfs_t
			syscall.Statfs(mnt, &st)
			p := filepath.Join(mnt, "ballast")
			os.WriteFile(p, make([]byte, int64(st.Bavail)*st.Bsize-512<<10), 0o600)
			return func() { os.Remove(p) }
		}},
		{"no free inodes", func() func() {
			var made []string
			for i := 0; ; i++ {
				p := filepath.Join(mnt, fmt.Sprintf("inode-%d", i))
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					break
				}
				made = append(made, p)
			}
			return func() {
				for _, p := range made {
					os.Remove(p)
				}
			}
		}},
		{"a failed write", func() func() {
			e.noteWrite(fmt.Errorf("write state.json: %w", syscall.ENOSPC))
			return func() {}
		}},
	}
	for _, c := range causes {
		undo := c.make()
		execFull(c.name)
		undo()
		// Over once the space is back (after a failed write: once a
		// probe write succeeds, at most once a second).
		deadline := time.Now().Add(30 * time.Second)
		for e.DiskStatus().Full {
			if time.Now().After(deadline) {
				t.Fatalf("%s: still full after it was undone: %+v", c.name, e.DiskStatus())
			}
			time.Sleep(20 * time.Millisecond)
		}
		execOK("after " + c.name)
	}
}
