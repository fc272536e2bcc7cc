//go:build unix

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
			os.WriteFile(p, make([]byte, int64(st.Bavail)*int64(st.Bsize)-512<<10), 0o600)
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

// TestWriteClassEachErrno sorts every errno, bare and wrapped the ways
// the engine's writes return them, into the state it puts the home in:
// the out-of-space errnos into disk_full, the errnos of a home that
// cannot be written at all into home_unwritable, every other into none.
func TestWriteClassEachErrno(t *testing.T) {
	want := map[syscall.Errno]string{
		syscall.ENOSPC: apitype.CodeDiskFull,
		syscall.EDQUOT: apitype.CodeDiskFull,
		syscall.EROFS:  apitype.CodeHomeUnwritable,
		syscall.EIO:    apitype.CodeHomeUnwritable,
		syscall.EACCES: apitype.CodeHomeUnwritable,
		syscall.EPERM:  apitype.CodeHomeUnwritable,
	}
	wraps := map[string]func(error) error{
		"bare":         func(err error) error { return err },
		"PathError":    func(err error) error { return &os.PathError{Op: "open", Path: "/home/sessions/x/state.json", Err: err} },
		"LinkError":    func(err error) error { return &os.LinkError{Op: "rename", Old: "a", New: "b", Err: err} },
		"SyscallError": func(err error) error { return os.NewSyscallError("renameat2", err) },
		"wrapped twice": func(err error) error {
			return fmt.Errorf("create session: %w", &os.PathError{Op: "mkdir", Path: "/home/sessions/x", Err: err})
		},
	}
	seen := map[string]int{}
	for errno := syscall.Errno(1); errno < 256; errno++ {
		for name, wrap := range wraps {
			err := wrap(errno)
			if got := writeClass(err); got != want[errno] {
				t.Errorf("%s %d (%v): class %q, want %q", name, int(errno), errno, got, want[errno])
			}
			seen[writeClass(err)]++
		}
	}
	// An error that only says it in words is no state: the class comes
	// from the errno, never from the text.
	for _, text := range []string{"no space left on device", "read-only file system", "permission denied"} {
		if got := writeClass(fmt.Errorf("write: %s", text)); got != "" {
			t.Errorf("%q: class %q, want none", text, got)
		}
	}
	if writeClass(nil) != "" {
		t.Error("nil has a class")
	}
	if seen[apitype.CodeDiskFull] != 2*len(wraps) || seen[apitype.CodeHomeUnwritable] != 4*len(wraps) {
		t.Fatalf("classes seen: %v", seen)
	}
	// Each class maps to a refusal: its code, the reason, and an HTTP
	// status that is not a server bug's 500.
	for _, code := range []string{apitype.CodeDiskFull, apitype.CodeHomeUnwritable} {
		e := refusalError(code, "the reason")
		if e.Code != code || !strings.Contains(e.Message, "the reason") || apitype.HTTPStatus(code) == 500 {
			t.Errorf("refusal of %s: %+v (HTTP %d)", code, e, apitype.HTTPStatus(code))
		}
	}
}

// TestHomeUnwritableState makes the home read-only under a running engine
// (a read-only bind mount over it: new opens through the home's path get
// EROFS, the engine's open files are left alone) and checks that exec
// refuses with home_unwritable while it lasts, that a failed write keeps
// the state until a probe write succeeds, and that an EACCES of a write
// while the home is writable (a probe succeeds) is no state at all.
func TestHomeUnwritableState(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
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
	execRefused := func(why string) {
		t.Helper()
		r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
		d, ok := r.Details.(*apitype.ErrorDetails)
		if !ok || d.Error.Code != apitype.CodeHomeUnwritable || !strings.Contains(r.Text, "cannot be written") {
			t.Fatalf("%s: exec was not refused with home_unwritable: %q %+v", why, r.Text, r.Details)
		}
		if ds := e.DiskStatus(); !ds.Unwritable || ds.Full || ds.Code != apitype.CodeHomeUnwritable || ds.Reason == "" {
			t.Fatalf("%s: status %+v", why, ds)
		}
	}
	waitWritable := func(why string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for e.DiskStatus().Refusing() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: still refusing: %+v", why, e.DiskStatus())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	execOK("a writable home")

	// EACCES and EIO of a write while the home can be written: not the
	// home's (the probe write succeeds).
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EIO} {
		e.noteWrite(&os.PathError{Op: "fork/exec", Path: "/usr/bin/conch", Err: errno})
		if ds := e.DiskStatus(); ds.Refusing() {
			t.Fatalf("%v of something else made the home refuse: %+v", errno, ds)
		}
	}
	execOK("after writes that failed elsewhere")

	// The read-only view is made elsewhere and then moved over the home:
	// a remount of a mount at the home's path would be refused while the
	// engine writes through it.
	view := t.TempDir()
	if out, err := exec.Command("mount", "--bind", home, view).CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount the home (needs root): %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", view).CombinedOutput(); err != nil {
		exec.Command("umount", "-l", view).Run()
		t.Fatalf("remount read-only: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "--move", view, home).CombinedOutput(); err != nil {
		exec.Command("umount", "-l", view).Run()
		t.Fatalf("mount --move: %v %s", err, out)
	}
	mounted := true
	unmount := func() {
		if mounted {
			exec.Command("umount", "-l", home).Run()
			mounted = false
		}
	}
	t.Cleanup(unmount)
	execRefused("a read-only home")
	// A failed write while it is read-only outlasts the mount: it ends
	// with a successful probe.
	e.noteWrite(&os.PathError{Op: "mkdir", Path: home + "/sessions/x", Err: syscall.EROFS})
	unmount()
	waitWritable("once the home is writable again")
	execOK("once the home is writable again")
}
