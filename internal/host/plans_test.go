package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

// recBackend is a sandbox backend that records the Run it is given and
// wraps the command in a marker argv; the real backends are tested in
// their packages and end to end (e2e/sandbox).
type recBackend struct {
	name string
	runs []*sandbox.Run
}

func (b *recBackend) Name() string                                { return b.name }
func (b *recBackend) Available(context.Context) error             { return nil }
func (b *recBackend) Prepare(context.Context, *sandbox.Run) error { return nil }
func (b *recBackend) Remove(context.Context, string) error        { return nil }
func (b *recBackend) Layers(*sandbox.Run) []string                { return []string{"rec"} }
func (b *recBackend) Command(r *sandbox.Run) ([]string, []string, error) {
	b.runs = append(b.runs, r)
	r.BlockFD = true     // a stand-in for bwrap's --block-fd 3
	r.CttyInside = r.PTY // and for its init's --ctty
	return append([]string{r.Exe, "sandbox-init", "--"}, "/bin/sh", "-lc", r.Command), r.Env, nil
}

func envOf(env []string, k string) (string, bool) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestSandboxPlan: the sandbox host runs the command under the shim's
// sandbox-init (Deps.InitExe), ungated, in the workspace or a workdir
// inside it (a sandbox path is mapped back; one outside is refused with a
// warning), with the sandbox's environment: its own HOME and LANG, the
// request env as given, and PATH additions carried in
// CONCH_PREPEND_PATH; bwrap with a PTY claims the terminal inside; no
// backend fails closed.
func TestSandboxPlan(t *testing.T) {
	home := t.TempDir()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := &sandboxHost{d: Deps{Home: home, InitExe: func() string { return "/opt/conch/conch-shim" }}}
	sb := config.SandboxSettings{On: true, Backend: "bwrap", Scope: "agent", WorkspaceAccess: "rw", WorkspacePath: "/workspace"}
	for _, c := range []struct {
		name, workdir, wantCwd string
		warn                   bool
	}{
		{"default", "", ws, false},
		{"relative", "sub", filepath.Join(ws, "sub"), false},
		{"sandbox path", "/workspace/sub", filepath.Join(ws, "sub"), false},
		{"host path", filepath.Join(ws, "sub"), filepath.Join(ws, "sub"), false},
		{"outside", "/etc", ws, true},
		{"missing", "nope", ws, true},
		{"tilde", "~/x", ws, true},
	} {
		b := &recBackend{name: "bwrap"}
		pl := &Plan{Agent: "main", PTY: true, Set: config.ExecSettings{PathPrepend: []string{"/opt/tools"}}}
		req := Request{Params: apitype.ExecParams{Command: "make", Workdir: c.workdir, Env: map[string]string{"PATH": "/req/bin", "FOO": "bar", "LD_PRELOAD": "x.so"}}, Workspace: ws, Sandbox: sb, Backend: b}
		if err := h.Plan(context.Background(), req, pl); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if pl.Cwd != c.wantCwd || (len(pl.Warnings) > 0) != c.warn {
			t.Errorf("%s: cwd %s warnings %q; want %s, warning %v", c.name, pl.Cwd, pl.Warnings, c.wantCwd, c.warn)
		}
		r := b.runs[0]
		if r.Exe != "/opt/conch/conch-shim" || pl.Argv[0] != r.Exe || pl.Gate != GateNone {
			t.Errorf("%s: exe %s argv %q gate %v", c.name, r.Exe, pl.Argv, pl.Gate)
		}
		if v, _ := envOf(pl.Env, "HOME"); v != sandbox.InsideHome {
			t.Errorf("%s: HOME %q", c.name, v)
		}
		if v, _ := envOf(pl.Env, "FOO"); v != "bar" {
			t.Errorf("%s: FOO %q", c.name, v)
		}
		if v, _ := envOf(pl.Env, "LD_PRELOAD"); v != "x.so" {
			t.Errorf("%s: the sandbox passes the request env as given; LD_PRELOAD %q", c.name, v)
		}
		if v, _ := envOf(pl.Env, "CONCH_PREPEND_PATH"); !strings.Contains(v, "/opt/tools") || !strings.Contains(v, "/req/bin") {
			t.Errorf("%s: CONCH_PREPEND_PATH %q", c.name, v)
		}
		if !strings.HasPrefix(r.Command, `export PATH="${CONCH_PREPEND_PATH}:$PATH"`) || !strings.HasSuffix(r.Command, "make") {
			t.Errorf("%s: command %q", c.name, r.Command)
		}
		if r.HostWorkspace != ws {
			t.Errorf("%s: the run's host workspace %q, want %q", c.name, r.HostWorkspace, ws)
		}
		if pl.Sandbox == nil || !pl.Sandbox.BlockFD || !pl.Sandbox.CttyInside || pl.Sandbox.Backend != "bwrap" {
			t.Errorf("%s: sandbox spec %+v", c.name, pl.Sandbox)
		}
		if pl.SbInfo == nil || pl.SbInfo.Workspace != "/workspace" || pl.SbInfo.HostWorkspace != ws || !slices.Equal(pl.SbInfo.Layers, []string{"rec"}) {
			t.Errorf("%s: sandbox info %+v", c.name, pl.SbInfo)
		}
	}

	if err := h.Plan(context.Background(), Request{Params: apitype.ExecParams{Command: "true"}, Workspace: ws, Sandbox: sb}, &Plan{}); err == nil || err.Code != apitype.CodeSandboxUnavail {
		t.Errorf("no backend: %v, want %s", err, apitype.CodeSandboxUnavail)
	}
	gone := filepath.Join(t.TempDir(), "gone")
	if err := h.Plan(context.Background(), Request{Params: apitype.ExecParams{Command: "true"}, Workspace: gone, Sandbox: sb, Backend: &recBackend{name: "bwrap"}}, &Plan{}); err == nil || err.Code != apitype.CodeSandboxUnavail {
		t.Errorf("a missing workspace: %v, want %s", err, apitype.CodeSandboxUnavail)
	}
}

// TestGatewayPlan: the gateway host is gated unless it runs for a reason
// (elevated full, sandboxing off), runs `sh -c` in the workspace or a
// workdir below it, refuses dangerous env keys, and warns when the
// login-shell PATH is not known in time.
func TestGatewayPlan(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	known := true
	g := &gateway{d: Deps{LoginPATH: func(w time.Duration) (string, bool, time.Duration) { return "/login/bin", known, 0 }}}
	pl := &Plan{}
	if err := g.Plan(context.Background(), Request{Params: apitype.ExecParams{Command: "ls", Workdir: "sub"}, Workspace: ws}, pl); err != nil {
		t.Fatal(err)
	}
	if pl.Gate != GatePolicy || pl.Cwd != filepath.Join(ws, "sub") || pl.Argv[1] != "-c" || pl.Argv[2] != "ls" || len(pl.Warnings) != 0 {
		t.Fatalf("plan: gate %v cwd %s argv %q warnings %q", pl.Gate, pl.Cwd, pl.Argv, pl.Warnings)
	}
	if v, _ := envOf(pl.Env, "PATH"); !strings.HasPrefix(v, "/login/bin") {
		t.Errorf("PATH %q, want the login PATH first", v)
	}
	known = false
	pl = &Plan{HostReason: "implicit-sandbox-off"}
	if err := g.Plan(context.Background(), Request{Params: apitype.ExecParams{Command: "ls", Workdir: "nope"}, Workspace: ws}, pl); err != nil {
		t.Fatal(err)
	}
	if pl.Gate != GateNone || pl.Cwd != ws || len(pl.Warnings) != 2 || !slices.Contains(pl.Warnings, LoginNotKnown) {
		t.Fatalf("ungated plan: gate %v cwd %s warnings %q", pl.Gate, pl.Cwd, pl.Warnings)
	}
	if err := g.Plan(context.Background(), Request{Params: apitype.ExecParams{Command: "ls", Env: map[string]string{"LD_PRELOAD": "x.so"}}, Workspace: ws}, &Plan{}); err == nil || err.Code != apitype.CodeSecurity {
		t.Errorf("LD_PRELOAD on the gateway: %v, want %s", err, apitype.CodeSecurity)
	}
}
