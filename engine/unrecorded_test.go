package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// brokenDirs are the ways a session directory stops taking writes, each
// a function that breaks dir and returns a restore (or skips the test
// when the machine cannot make it): a path that is no longer a
// directory (ENOTDIR, also for an unprivileged user), a read-only mount
// (EROFS) and a full filesystem (ENOSPC).
var brokenDirs = map[string]func(t *testing.T, dir string) func(){
	"not a directory": func(t *testing.T, dir string) func() {
		aside := dir + ".aside"
		if err := os.Rename(dir, aside); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return func() { os.Remove(dir); os.Rename(aside, dir) }
	},
	"read-only mount": func(t *testing.T, dir string) func() {
		if out, err := exec.Command("mount", "--bind", "-o", "ro", dir, dir).CombinedOutput(); err != nil {
			t.Skipf("cannot bind-mount read-only (needs root): %v %s", err, out)
		}
		if out, err := exec.Command("mount", "-o", "remount,ro,bind", dir).CombinedOutput(); err != nil {
			exec.Command("umount", "-l", dir).Run()
			t.Fatalf("remount read-only: %v %s", err, out)
		}
		return func() { exec.Command("umount", "-l", dir).Run() }
	},
	"full filesystem": func(t *testing.T, dir string) func() {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
		}
		// Fill it: the last write fails with ENOSPC.
		f, err := os.Create(filepath.Join(dir, "fill"))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
		f.Close()
		return func() { exec.Command("umount", "-l", dir).Run() }
	},
}

// TestStateWriteFailuresAreToldAndCounted breaks a session's directory
// in each way of brokenDirs and checks, at the engine's writers of
// session state, that no failure is dropped: a failed state.json write
// and a failed exit.json write are each counted (Stats.WriteFailures,
// conch_state_write_failures_total), and the end state that could not be
// recorded says so, down to the exec result's text. A directory the
// engine removed meanwhile is not a failure.
func TestStateWriteFailuresAreToldAndCounted(t *testing.T) {
	for name, breakDir := range brokenDirs {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t)
			id := "brisk-otter"
			dir := proto.SessionDir(e.home, id)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			s := e.newSession(id, dir, "main")
			s.st = state{Agent: "main", Command: "true", Host: "gateway"}
			restore := breakDir(t, dir)
			defer restore()

			s.update(func(st *state) { st.Backgrounded = true })
			if n := e.WriteFailures()["state"]; n != 1 {
				t.Errorf("failed state.json write counted %d times, want 1", n)
			}
			code := 0
			ex := e.recordExit(s, proto.Exit{State: proto.StateExited, ExitCode: &code, Final: true}, true)
			if ex.NotRecorded == "" {
				t.Fatal("an end state that could not be written does not say so")
			}
			if n := e.Stats().WriteFailures["exit"]; n != 1 {
				t.Errorf("failed exit.json write counted %d times, want 1", n)
			}
			res := endResult(s, ex, outputText{text: "hi"}, config.ExecSettings{})
			if !strings.Contains(res.Text, "could not be recorded") {
				t.Errorf("the result claims a recorded end: %q", res.Text)
			}
			restore()
			if _, ok, err := proto.ReadExit(dir); ok || err != nil {
				t.Errorf("exit.json after the failed write: ok %v, err %v", ok, err)
			}
		})
	}
	t.Run("removed directory", func(t *testing.T) {
		e := newEngine(t)
		dir := proto.SessionDir(e.home, "gone-otter")
		s := e.newSession("gone-otter", dir, "main")
		s.update(func(st *state) { st.Backgrounded = true })
		if ex := e.recordExit(s, proto.Exit{State: proto.StateLost, Final: true}, false); ex.NotRecorded != "" {
			t.Errorf("a removed session's end is reported unrecorded: %q", ex.NotRecorded)
		}
		if n := e.WriteFailures(); len(n) != 0 {
			t.Errorf("writes into a removed directory counted as failures: %v", n)
		}
	})
}
