package docker

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

func TestDockerArgv(t *testing.T) {
	s := (&config.Config{}).SandboxFor("main")
	s.MemoryBytes, s.CPUs, s.WorkspaceAccess = 1<<30, 1.5, "ro"
	s.Docker.Ulimits = []string{"nofile=1024:1024"}
	r := &sandbox.Run{Home: "/h", Exe: "/x/conch", Settings: s, Workspace: "/srv/p", Cwd: "/srv/p/sub", Command: "make", PTY: true,
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
