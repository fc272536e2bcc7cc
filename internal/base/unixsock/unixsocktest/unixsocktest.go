//go:build unix

// Package unixsocktest is for tests of the code that creates private unix
// sockets: it checks that creating one never changes the process umask,
// which every command forked meanwhile (by a supervisor in another
// goroutine) inherits.
package unixsocktest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// CheckUmaskKept sets the umask to 022 for the test, then calls listen again
// and again (it creates a socket and returns its path and a function that
// closes it) while commands that print their umask run. It fails t when a
// command saw another umask or a socket's mode was not 0600.
func CheckUmaskKept(t testing.TB, listen func() (path string, closeIt func(), err error)) {
	t.Helper()
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
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
			path, closeIt, err := listen()
			if err != nil {
				done <- err
				return
			}
			fi, err := os.Lstat(path)
			closeIt()
			if err == nil && fi.Mode().Perm() != 0o600 {
				err = fmt.Errorf("socket mode %v, want 0600", fi.Mode())
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	const n = 60
	var bad []string
	for i := 0; i < n; i++ {
		out, err := exec.Command("sh", "-c", "umask").Output()
		if err != nil {
			close(stop)
			<-done
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
		t.Fatalf("%d of %d commands started while sockets were created ran with umask %v, want 0022", len(bad), n, bad)
	}
}
