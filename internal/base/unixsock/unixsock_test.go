//go:build unix

package unixsock

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// umaskNow reads the process umask without changing it (Linux 4.7+).
func umaskNow(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Umask:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Skip("the kernel does not report the umask")
	return ""
}

// TestListenPrivate: under a permissive umask, the socket has exactly
// the mode asked for, accepts connections at path, replaces a stale file,
// leaves no temporary directory, and closing removes it; meanwhile the
// process umask, watched all along, never changes.
func TestListenPrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	want := umaskNow(t)
	var changed atomic.Value
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if u := umaskNow(t); u != want {
				changed.Store(u)
			}
		}
	}()
	dir := t.TempDir()
	// Under umask 0 the directory is 0777, which Listen refuses
	// (TestListenRefusesDirectoriesOthersControl): this test is about the
	// umask, so the directory is made private.
	os.Chmod(dir, 0o700)
	p := filepath.Join(dir, "engine.sock")
	for i := 0; i < 200; i++ {
		if i == 0 {
			os.WriteFile(p, []byte("stale"), 0o666)
		}
		ln, err := Listen(p, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket %v mode %v", err, fi.Mode())
		}
		c, err := net.Dial("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		ln.Close()
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("socket left after Close: %v", err)
		}
	}
	close(stop)
	<-done
	if u := changed.Load(); u != nil {
		t.Fatalf("the umask changed to %v while listening", u)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) > 0 {
		t.Fatalf("temporary directories left: %v", m)
	}
}

// TestListenLongPath: a path whose private staging name would not fit a
// socket address is bound in place when its directory is private, and
// refused when it is not.
func TestListenLongPath(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", maxSocketPath-len(dir)-8))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(long, "s.sock")
	if len(p) > maxSocketPath {
		t.Fatalf("test path too long: %d", len(p))
	}
	ln, err := Listen(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	ln.Close()
	os.Chmod(long, 0o755)
	if ln, err := Listen(p, 0o600); err == nil {
		ln.Close()
		t.Fatal("bound in place in a directory others can enter")
	}
}

// TestListenRefusesDirectoriesOthersControl: a socket is never put in a
// directory another user owns or may write to (they could unlink it and
// put their own in its place, and our clients would talk to them), and
// what is already at the path is replaced, never followed or emptied.
// Generated over the ways a directory can be someone else's, at a short
// path and at one too long to stage.
func TestListenRefusesDirectoriesOthersControl(t *testing.T) {
	type member struct {
		name  string
		setup func(t *testing.T, dir string) // makes dir someone else's
	}
	members := []member{
		{"mode 0777", func(t *testing.T, dir string) { os.Chmod(dir, 0o777) }},
		{"mode 0770", func(t *testing.T, dir string) { os.Chmod(dir, 0o770) }},
		{"mode 0703", func(t *testing.T, dir string) { os.Chmod(dir, 0o703) }},
		{"mode 1777", func(t *testing.T, dir string) { os.Chmod(dir, 0o777|os.ModeSticky) }},
	}
	if os.Getuid() == 0 {
		members = append(members,
			member{"owned by nobody, 0700", func(t *testing.T, dir string) { os.Chown(dir, 65534, 65534) }},
			member{"owned by nobody, 0755", func(t *testing.T, dir string) { os.Chown(dir, 65534, 65534); os.Chmod(dir, 0o755) }})
	}
	for _, m := range members {
		for _, long := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/long=%v", m.name, long), func(t *testing.T) {
				base := t.TempDir()
				dir := filepath.Join(base, "run")
				if long {
					dir = filepath.Join(base, strings.Repeat("d", maxSocketPath-len(base)-8))
				}
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				m.setup(t, dir)
				t.Cleanup(func() { os.Chown(dir, os.Getuid(), os.Getgid()); os.Chmod(dir, 0o700) })
				p := filepath.Join(dir, "s.sock")
				ln, err := Listen(p, 0o600)
				if err == nil {
					ln.Close()
					t.Fatalf("listened at %s in a directory others control", p)
				}
				if !strings.Contains(err.Error(), dir) {
					t.Fatalf("the error does not name the directory: %v", err)
				}
			})
		}
	}
	// What is at the path: a symlink is replaced, not followed; a
	// directory is an error and stays.
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(target, []byte("keep"), 0o600)
	p := filepath.Join(dir, "s.sock")
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("symlink not replaced by the socket: %v %v", err, fi)
	}
	ln.Close()
	if b, err := os.ReadFile(target); err != nil || string(b) != "keep" {
		t.Fatalf("the symlink's target was touched: %v %q", err, b)
	}
	os.Mkdir(p, 0o700)
	os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o600)
	if ln, err := Listen(p, 0o600); err == nil {
		ln.Close()
		t.Fatal("listened over a directory")
	}
	if _, err := os.Stat(filepath.Join(p, "f")); err != nil {
		t.Fatalf("the directory at the path was removed: %v", err)
	}
}
