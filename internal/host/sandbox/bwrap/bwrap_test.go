//go:build linux

package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

func TestBwrapArgv(t *testing.T) {
	s := (&config.Config{}).SandboxFor("main")
	s.On = true
	// The unstaged shape (a gateway that is not root, or runAs 0:0) with
	// the git directory's members protected one by one.
	s.RunAsUID, s.RunAsGID, s.GitAccess = 0, 0, "rw"
	b := &Bwrap{bin: "/usr/bin/bwrap"}
	b.probe.Get(context.Background(), func() error { return nil })
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	home := t.TempDir() // the search for repositories records what it found there
	r := &sandbox.Run{Home: home, Exe: "/x/conch", Settings: s, Workspace: ws, Cwd: filepath.Join(ws, "sub"), Command: "echo hi", PTY: true}
	argv, _, err := b.Command(r)
	if err != nil {
		t.Fatal(err)
	}
	if !r.BlockFD {
		t.Error("bwrap waits on --block-fd 3, but the run does not say so (the supervisor would pass no fd 3)")
	}
	if !r.ProtectedReadOnly || len(r.Protected) == 0 {
		t.Errorf("bwrap mounts %q read-only, but the run says ProtectedReadOnly=%v", r.Protected, r.ProtectedReadOnly)
	}
	if !r.CttyInside {
		t.Error("the init claims the PTY inside (--ctty), but the run does not say so (the supervisor would make it bwrap's terminal)")
	}
	a := strings.Join(argv, " ")
	for _, want := range []string{"--unshare-all --die-with-parent --hostname conch-sandbox", "--ro-bind /usr /usr", "--tmpfs /tmp",
		"--bind " + home + "/sandboxes/agent-main/home /home/conch", "--bind " + ws + " " + ws, "--bind " + ws + "/.git " + ws + "/.git --ro-bind " + ws + "/.git/hooks " + ws + "/.git/hooks",
		"--ro-bind /x/conch /run/conch/conch", "--chdir " + ws + "/sub", "--block-fd 3", "--cap-drop ALL",
		"--seccomp 4 -- /run/conch/conch sandbox-init --verify-mounts " + ws + " --ctty -- /bin/sh -lc echo hi"} {
		if !strings.Contains(a, want) {
			t.Errorf("argv lacks %q:\n%s", want, a)
		}
	}
	// The seccomp program refuses TIOCSTI; a new session would only cost
	// a scheduler group (the PTY run's init makes its own).
	if slices.Contains(argv, "--new-session") {
		t.Errorf("argv has --new-session:\n%s", a)
	}
	if slices.Contains(argv, "--share-net") {
		t.Error("network shared by default")
	}
	s.Network, s.WorkspaceAccess, s.WorkspacePath = "open", "ro", "/workspace"
	s.Binds = []string{"/etc:/x"}
	r.Settings, r.PTY = s, false
	if _, _, err := b.Command(r); err == nil {
		t.Fatal("refused bind accepted")
	}
	s.Binds = nil
	r.Settings = s
	argv, _, _ = b.Command(r)
	a = strings.Join(argv, " ")
	if !strings.Contains(a, "--share-net") || !strings.Contains(a, "--ro-bind "+ws+" /workspace") || strings.Contains(a, "sandbox-init") ||
		strings.Index(a, "--tmpfs /run") > strings.Index(a, "/run/systemd/resolve") {
		t.Fatalf("open/ro/workspace argv: %s", a)
	}
	// gitAccess ro (the default): the whole .git is read-only; a root
	// gateway stages the workspace, home and binary and drops to runAs.
	s = (&config.Config{}).SandboxFor("main")
	r.Settings = s
	argv, _, err = b.Command(r)
	if err != nil {
		t.Fatal(err)
	}
	a = strings.Join(argv, " ")
	src := ws
	if os.Geteuid() == 0 {
		src = StageDir + "/ws"
		if !strings.HasPrefix(a, "/x/conch sandbox-init --stage ") || !strings.Contains(a, " -- /usr/bin/bwrap ") ||
			!strings.Contains(a, "--bind "+StageDir+"/home /home/conch") || !strings.Contains(a, "--ro-bind "+StageDir+"/conch /run/conch/conch") {
			t.Fatalf("Staged argv: %s", a)
		}
	}
	if !strings.Contains(a, "--bind "+src+" "+ws+" --ro-bind "+src+"/.git "+ws+"/.git --ro-bind") {
		t.Fatalf("gitAccess ro argv: %s", a)
	}
}
