package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestEngineSocketKeepsUmask: creating the engine socket never changes the
// process umask, which every command a supervisor forks meanwhile
// inherits. Commands that print their umask are started all the while the
// socket is created again and again; each must print the process's
// umask, and the socket must still be 0600.
func TestEngineSocketKeepsUmask(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "engine.sock")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
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
			ln, err := listenEngineSocket(path, log)
			if err != nil {
				done <- err
				return
			}
			fi, err := os.Lstat(path)
			ln.Close()
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
		t.Fatalf("%d of 60 commands started while the engine socket was created ran with umask %v, want 0022", len(bad), bad)
	}
}
