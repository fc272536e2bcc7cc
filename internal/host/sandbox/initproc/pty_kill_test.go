//go:build linux

package initproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInitOnItsOwnPTY: with --pty (docker exec without -t has no
// terminal) the command runs on a terminal the init made, in a session of
// its own with that terminal as controlling terminal, its output relayed;
// the init returns the command's exit code, 128+n for a signal.
func TestInitOnItsOwnPTY(t *testing.T) {
	out, err := initCmd(t, "--pty", "--", "/bin/sh", "-c", `tty; [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && echo own-session; exit 3`).Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want 3: %q", err, out)
	}
	text := strings.ReplaceAll(string(out), "\r", "")
	if !strings.Contains(text, "/dev/pts/") || !strings.Contains(text, "own-session") {
		t.Fatalf("the command was not on a terminal of its own in its own session:\n%s", text)
	}
	_, err = initCmd(t, "--pty", "--", "/bin/sh", "-c", "kill -TERM $$").Output()
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("a command ended by SIGTERM: %v, want exit %d", err, 128+int(syscall.SIGTERM))
	}
}

// TestInitKillsASession: --kill-session ID ends every process whose
// environment carries CONCH_SESSION_ID=ID (first or later in it), with
// SIGTERM and then SIGKILL for one that ignores it, and none other.
func TestInitKillsASession(t *testing.T) {
	id := fmt.Sprintf("kill-test-%d", os.Getpid())
	start := func(env []string, script string) *exec.Cmd {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	first := start([]string{"CONCH_SESSION_ID=" + id, "PATH=/usr/bin:/bin"}, "exec sleep 1000")
	later := start([]string{"PATH=/usr/bin:/bin", "CONCH_SESSION_ID=" + id}, "trap '' TERM; while :; do sleep 1; done")
	other := start([]string{"PATH=/usr/bin:/bin", "CONCH_SESSION_ID=" + id + "-other"}, "exec sleep 1000")
	waits := map[*exec.Cmd]chan error{}
	for _, c := range []*exec.Cmd{first, later} {
		ch := make(chan error, 1)
		go func(c *exec.Cmd) { _, err := c.Process.Wait(); ch <- err }(c)
		waits[c] = ch
	}
	// The processes must have exec'd with their environment before the
	// init looks: /proc/PID/environ is readable as soon as they exist.
	out, err := initCmd(t, "--kill-session", id, "--grace-ms", "200").Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "killed 2" && got != "killed 3" { // the shell of `later` and its sleep
		t.Fatalf("said %q, want killed 2 (or 3 with the loop's sleep)", got)
	}
	for c, ch := range waits {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("pid %d outlived --kill-session", c.Process.Pid)
		}
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process of another session was killed: %v", err)
	}
}
