package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/config"
)

func TestViewMapping(t *testing.T) {
	s := (&config.Config{}).SandboxFor("main")
	v := NewView("/srv/proj", s, "bwrap")
	if in, ok := v.MapIn("/srv/proj/a/b"); !ok || in != "/srv/proj/a/b" {
		t.Fatalf("same: %q %v", in, ok)
	}
	s.WorkspacePath = "/workspace"
	v = NewView("/srv/proj", s, "bwrap")
	if in, ok := v.MapIn("/srv/proj/a"); !ok || in != "/workspace/a" {
		t.Fatalf("mapped in: %q %v", in, ok)
	}
	if out, ok := v.MapOut("/workspace/a"); !ok || out != "/srv/proj/a" {
		t.Fatalf("mapped out: %q %v", out, ok)
	}
	for _, p := range []string{"/srv/project", "/srv", "/workspace/../etc"} {
		if _, ok := v.MapIn(p); ok {
			t.Errorf("%s mapped in", p)
		}
		if _, ok := v.MapOut(p); ok {
			t.Errorf("%s mapped out", p)
		}
	}
	if NewView("/srv/proj", (&config.Config{}).SandboxFor("m"), "docker").Inside != "/workspace" {
		t.Fatal("docker always mounts /workspace")
	}
}

func TestUnsafeWorkspaceAndBinds(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "conch")
	os.MkdirAll(home, 0o700)
	uh, _ := os.UserHomeDir()
	for _, ws := range []string{"/", root, home, uh} {
		if err := WorkspaceSafe(home, ws); err == nil {
			t.Errorf("workspace %s accepted", ws)
		}
	}
	if err := WorkspaceSafe(home, t.TempDir()); err != nil {
		t.Errorf("a plain directory refused: %v", err)
	}
	for _, b := range []string{"/", "/etc", "/proc", "/sys", "/dev", "/run", "/var/run/docker.sock", uh, home, root} {
		if err := CheckBind(home, b); err == nil {
			t.Errorf("bind %s accepted", b)
		}
	}
	if err := CheckBind(home, "/usr/share"); err != nil {
		t.Errorf("bind /usr/share refused: %v", err)
	}
}

func TestBwrapArgv(t *testing.T) {
	s := (&config.Config{}).SandboxFor("main")
	s.On = true
	// The unstaged shape (a gateway that is not root, or runAs 0:0) with
	// the git directory's members protected one by one.
	s.RunAsUID, s.RunAsGID, s.GitAccess = 0, 0, "rw"
	b := &Bwrap{bin: "/usr/bin/bwrap"}
	b.probe.done = true
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	home := t.TempDir() // the search for repositories records what it found there
	r := &Run{Home: home, Exe: "/x/conch", Settings: s, Workspace: ws, Cwd: filepath.Join(ws, "sub"), Command: "echo hi", PTY: true}
	argv, _, err := b.Command(r)
	if err != nil {
		t.Fatal(err)
	}
	a := strings.Join(argv, " ")
	for _, want := range []string{"--unshare-all --die-with-parent --new-session", "--ro-bind /usr /usr", "--tmpfs /tmp",
		"--bind " + home + "/sandboxes/agent-main/home /home/conch", "--bind " + ws + " " + ws, "--bind " + ws + "/.git " + ws + "/.git --ro-bind " + ws + "/.git/hooks " + ws + "/.git/hooks",
		"--ro-bind /x/conch /run/conch/conch", "--chdir " + ws + "/sub", "--block-fd 3", "--cap-drop ALL",
		"--seccomp 4 -- /run/conch/conch sandbox-init --verify-mounts " + ws + " --ctty -- /bin/sh -lc echo hi"} {
		if !strings.Contains(a, want) {
			t.Errorf("argv lacks %q:\n%s", want, a)
		}
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
			t.Fatalf("staged argv: %s", a)
		}
	}
	if !strings.Contains(a, "--bind "+src+" "+ws+" --ro-bind "+src+"/.git "+ws+"/.git --ro-bind") {
		t.Fatalf("gitAccess ro argv: %s", a)
	}
}

func TestDockerArgv(t *testing.T) {
	s := (&config.Config{}).SandboxFor("main")
	s.MemoryBytes, s.CPUs, s.WorkspaceAccess = 1<<30, 1.5, "ro"
	s.Docker.Ulimits = []string{"nofile=1024:1024"}
	r := &Run{Home: "/h", Exe: "/x/conch", Settings: s, Workspace: "/srv/p", Cwd: "/srv/p/sub", Command: "make", PTY: true,
		Env: []string{"HOME=/home/conch", "LANG=C.UTF-8", "CONCH_SESSION_ID=abc"}}
	a := strings.Join(createArgs(r), " ")
	for _, want := range []string{"create --name conch-sbx-agent-main", "--label conch.scope=agent-main", "--read-only", "--network none",
		"--cap-drop ALL", "--security-opt no-new-privileges", "--pids-limit 512", "--memory 1073741824", "--cpus 1.5",
		"--ulimit nofile=1024:1024", "-v /srv/p:/workspace:ro", "-v /h/sandboxes/agent-main/home:/home/conch",
		"-v /x/conch:/run/conch/conch:ro", "debian:bookworm-slim sleep infinity"} {
		if !strings.Contains(a, want) {
			t.Errorf("docker create lacks %q:\n%s", want, a)
		}
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker client not installed")
	}
	argv, _, err := (&Docker{}).Command(r)
	if err != nil {
		t.Fatal(err)
	}
	c := strings.Join(argv, " ")
	if !strings.Contains(c, "exec -i -w /workspace/sub") || strings.Contains(c, " -t ") || strings.Contains(c, "HOME=") ||
		!strings.Contains(c, "-e CONCH_SESSION_ID=abc") || !strings.HasSuffix(c, "conch-sbx-agent-main /run/conch/conch sandbox-init --pty -- /bin/sh -lc make") {
		t.Fatalf("docker exec argv: %s", c)
	}
	if n := ContainerName(strings.Repeat("x", 80)); len(n) > 63 {
		t.Fatalf("name too long: %s", n)
	}
}

// TestListening reads this process's own socket table (the fallback of
// the in-sandbox port probe without root).
func TestListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if !Listening(os.Getpid(), fmt.Sprintf("127.0.0.1:%d", port)) || !Listening(os.Getpid(), fmt.Sprintf("localhost:%d", port)) {
		t.Fatal("own listener not found")
	}
	if Listening(os.Getpid(), fmt.Sprintf("127.0.0.2:%d", port)) {
		t.Fatal("a listener on 127.0.0.1 matched 127.0.0.2")
	}
	ln6, err := net.Listen("tcp", "[::]:0")
	if err == nil {
		defer ln6.Close()
		p6 := ln6.Addr().(*net.TCPAddr).Port
		if !Listening(os.Getpid(), fmt.Sprintf("127.0.0.1:%d", p6)) {
			t.Fatal("wildcard v6 listener not found")
		}
	}
	ln.Close()
	if Listening(os.Getpid(), fmt.Sprintf("127.0.0.1:%d", port)) {
		t.Fatal("closed listener still found")
	}
}
