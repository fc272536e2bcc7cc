package config

import (
	"strings"
	"testing"
)

func TestSandboxDefaultsAndOverride(t *testing.T) {
	c, err := Parse([]byte(`{"sandbox":{"mode":"non-main","network":"OPEN","limits":{"memoryBytes":67108864},"bwrap":{"roBinds":["/srv/data:/data"]}},
		"agents":{"build":{"sandbox":{"workspaceAccess":"ro","limits":{"pids":0,"cpus":1.5}}},"solo":{"sandbox":{"mode":"off","scope":"shared"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := c.SandboxFor("main")
	if m.On || m.Mode != "non-main" || m.Scope != "agent-main" || m.Network != "open" || m.Pids != 512 || m.MemoryBytes != 64<<20 ||
		m.WorkspaceAccess != "rw" || m.WorkspacePath != "same" || m.Backend != "auto" || m.Env["LANG"] != "C.UTF-8" || len(m.ProtectPaths) != 3 {
		t.Fatalf("main: %+v", m)
	}
	b := c.SandboxFor("build")
	if !b.On || b.WorkspaceAccess != "ro" || b.Pids != 0 || b.CPUs != 1.5 || b.MemoryBytes != 64<<20 || b.ROBinds[0] != "/srv/data:/data" {
		t.Fatalf("build: %+v", b)
	}
	if s := c.SandboxFor("solo"); s.On || s.Scope != "shared" {
		t.Fatalf("solo: %+v", s)
	}
	if d := (&Config{}).SandboxFor("x"); d.On || d.Mode != "off" || d.Docker.Image != "debian:bookworm-slim" || d.Docker.IdleHours != 24 {
		t.Fatalf("zero config: %+v", d)
	}
}

func TestSandboxValidation(t *testing.T) {
	_, err := Parse([]byte(`{"sandbox":{"mode":"some","backend":"chroot","workspaceAccess":"rwx","workspacePath":"/ws","network":"lan",
		"protectPaths":["../x","/abs"],"env":{"1BAD":"x"},"bwrap":{"binds":["relative"]},"limits":{"memoryBytes":10,"pids":-1}},
		"agents":{"a":{"sandbox":{"scope":"team"}}}}`))
	if err == nil {
		t.Fatal("invalid sandbox section accepted")
	}
	for _, want := range []string{`sandbox.mode: invalid value "some"`, `sandbox.backend: invalid value "chroot"`, `sandbox.workspaceAccess`,
		`sandbox.workspacePath`, `sandbox.network`, `protectPaths: "../x"`, `protectPaths: "/abs"`, `sandbox.env: invalid variable name "1BAD"`,
		`bind "relative"`, `memoryBytes: 10`, `pids: -1`, `agents.a.sandbox.scope`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if _, err := Parse([]byte(`{"sandbox":{"unknown":1}}`)); err == nil {
		t.Fatal("unknown sandbox key accepted")
	}
}
