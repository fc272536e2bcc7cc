package unixsock

import (
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
