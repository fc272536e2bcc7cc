package seatbelt

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEscapes runs commands under the real sandbox-exec with the
// profile of a default run (rw workspace, git ro, network none) and
// checks what the profile promises: the workspace and the scope writable;
// outside, the hidden home, the repository's git files, a first mkdir
// of a protected path (also in another letter case), a rename of .git, a connect to a listener on the
// host and a signal to a host process all refused. Not yet run on macOS:
// it is compiled by the cross-build gate and waits for a Mac.
func TestEscapes(t *testing.T) {
	if _, err := os.Stat(SandboxExec); err != nil {
		t.Skipf("%s: %v", SandboxExec, err)
	}
	dir := t.TempDir()
	r := testRun(t, dir, nil)
	userHome := filepath.Join(dir, "Users/me")
	os.WriteFile(filepath.Join(userHome, "secret"), []byte("s"), 0o600)
	outside := filepath.Join(dir, "outside")
	os.Mkdir(outside, 0o700)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	b := &Seatbelt{UserHome: userHome}
	for _, c := range []struct {
		cmd string
		ok  bool
	}{
		{"echo x > " + filepath.Join(r.Workspace, "made"), true},
		{`echo x > "$HOME/made" && echo x > "$TMPDIR/made"`, true},
		{"echo x > " + filepath.Join(outside, "f"), false},
		{"cat " + filepath.Join(userHome, "secret"), false},
		{"echo x > " + filepath.Join(r.Workspace, ".git/hooks/pre-commit"), false},
		{"echo x >> " + filepath.Join(r.Workspace, ".git/config"), false},
		{"mkdir " + filepath.Join(r.Workspace, ".conch"), false},
		{"mkdir " + filepath.Join(r.Workspace, ".Conch"), false},
		{"echo x > " + filepath.Join(r.Workspace, ".GIT/hooks/pre-commit"), false},
		{"mv " + filepath.Join(r.Workspace, ".git") + " " + filepath.Join(r.Workspace, "g2"), false},
		{fmt.Sprintf("/usr/bin/nc -z -w 2 127.0.0.1 %d", port), false},
		{fmt.Sprintf("kill -0 %d", os.Getpid()), false},
	} {
		r.Command = c.cmd
		argv, env, err := b.Command(r)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env, cmd.Dir = env, r.Workspace
		out, err := cmd.CombinedOutput()
		if (err == nil) != c.ok {
			t.Errorf("%s: ran %v, want %v: %s", c.cmd, err == nil, c.ok, out)
		}
		if !c.ok && strings.Contains(string(out), "sandbox-exec:") {
			t.Errorf("%s: the profile was refused, not the operation: %s", c.cmd, out)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Error("a file was written outside the workspace")
	}
}
