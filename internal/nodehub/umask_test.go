package nodehub

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMirrorSocketKeepsUmask: a mirror creating its control socket never
// changes the process umask, which commands forked meanwhile inherit.
// Commands that print their umask run all the while sockets are created
// again and again; each must print the process's umask, and every socket
// must be 0600.
func TestMirrorSocketKeepsUmask(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "s", "node-session.sock")
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			m := &mirror{}
			if err := m.listen(path); err != nil {
				done <- err
				return
			}
			fi, err := os.Lstat(path)
			m.ln.Close()
			if err == nil && fi.Mode().Perm() != 0o600 {
				err = fmt.Errorf("socket mode %v, want 0600", fi.Mode())
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	var bad []string
	for i := 0; i < 60; i++ {
		out, err := exec.Command("sh", "-c", "umask").Output()
		if err != nil {
			t.Fatal(err)
		}
		if u := strings.TrimSpace(string(out)); u != "0022" && u != "022" {
			bad = append(bad, u)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("%d of 60 commands started while mirror sockets were created ran with umask %v, want 0022", len(bad), bad)
	}
}
