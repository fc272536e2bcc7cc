package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
)

func patchEngine(t *testing.T, cfgJSON string, opt Options) *Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	opt.Home, opt.Config, opt.SupervisorArgv = t.TempDir(), cfg, []string{os.Args[0], "supervise"}
	e, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func callPatch(e *Engine, input string) apitype.Result {
	b, _ := json.Marshal(map[string]string{"input": input})
	return e.Call(context.Background(), "main", "apply_patch", b)
}

func errCode(r apitype.Result) string {
	if d, ok := r.Details.(*apitype.ErrorDetails); ok && d.Error != nil && d.Status == "failed" {
		return d.Error.Code
	}
	return ""
}

// TestPatchHosts covers the host seam: the implicit host applies on the
// gateway workspace, an explicit sandbox without a sandbox fails closed,
// a sandbox target maps /workspace paths onto its host directory and a
// read-only one is unavailable, node without a node hook is unavailable.
func TestPatchHosts(t *testing.T) {
	ws := t.TempDir()
	e := patchEngine(t, `{"tools":{"exec":{"applyPatch":{"enabled":true}}}}`, Options{Workdir: ws})
	r := callPatch(e, "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch")
	if r.Text != "Success. Updated the following files:\nA a.txt" {
		t.Fatalf("gateway: %q", r.Text)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "a\n" {
		t.Fatalf("a.txt = %q", b)
	}

	e2 := patchEngine(t, `{"tools":{"exec":{"host":"sandbox","applyPatch":{"enabled":true}}}}`, Options{Workdir: ws})
	r = callPatch(e2, "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch")
	if errCode(r) != "unavailable" || !strings.Contains(r.Text, "sandbox runtime is unavailable") {
		t.Fatalf("sandbox off: %q", r.Text)
	}

	host := t.TempDir()
	ro := false
	e3 := patchEngine(t, `{"tools":{"exec":{"host":"sandbox","applyPatch":{"enabled":true}}}}`, Options{
		Workdir: ws,
		PatchSandbox: func(agent string) (PatchTarget, bool, *apitype.Error) {
			return PatchTarget{Workspace: host, ViewRoot: "/workspace", ReadOnly: ro}, true, nil
		},
	})
	r = callPatch(e3, "*** Begin Patch\n*** Add File: /workspace/src/c.txt\n+c\n*** End Patch")
	if r.Text != "Success. Updated the following files:\nA src/c.txt" {
		t.Fatalf("sandbox: %q", r.Text)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "src", "c.txt")); string(b) != "c\n" {
		t.Fatalf("sandbox write: %q", b)
	}
	ro = true
	r = callPatch(e3, "*** Begin Patch\n*** Add File: d.txt\n+d\n*** End Patch")
	if errCode(r) != "unavailable" || r.Text != "apply_patch is unavailable: the sandbox workspace is not writable." {
		t.Fatalf("read-only: %q", r.Text)
	}

	e4 := patchEngine(t, `{"tools":{"exec":{"host":"node","applyPatch":{"enabled":true}}}}`, Options{Workdir: ws})
	if r = callPatch(e4, "*** Begin Patch\n*** Add File: e.txt\n+e\n*** End Patch"); errCode(r) != "unavailable" {
		t.Fatalf("node: %q", r.Text)
	}
}
