package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needBwrap skips when bubblewrap or user namespaces are missing.
func needBwrap(t *testing.T) {
	t.Helper()
	bin, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap)")
	}
	if out, err := exec.Command(bin, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bwrap cannot create namespaces here (user namespaces unavailable?): %v %s", err, out)
	}
}

// sandboxEnv is a conch home with sandboxing on for every agent and a
// workspace, plus a fake user HOME with a ~/.ssh key.
type sandboxEnv struct {
	home, ws, userHome string
	c                  *conch
}

func newSandbox(t *testing.T, sandboxConf map[string]any) *sandboxEnv {
	t.Helper()
	root := t.TempDir()
	se := &sandboxEnv{ws: filepath.Join(root, "ws"), userHome: filepath.Join(root, "user")}
	os.MkdirAll(se.ws, 0o755)
	os.MkdirAll(filepath.Join(se.userHome, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(se.userHome, ".ssh", "id_ed25519"), []byte("SECRET-KEY-930\n"), 0o600)
	sb := map[string]any{"mode": "all", "backend": "bwrap"}
	for k, v := range sandboxConf {
		sb[k] = v
	}
	conf, _ := json.Marshal(map[string]any{"sandbox": sb, "agents": map[string]any{"main": map[string]any{"workspace": se.ws}}})
	se.home = newHome(t, string(conf))
	os.WriteFile(filepath.Join(se.home, "secret.txt"), []byte("CONCH-HOME-SECRET\n"), 0o600)
	se.c = startConchEnv(t, se.home, []string{"HOME=" + se.userHome})
	return se
}

func TestSandboxBasics(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, nil)
	r := se.c.exec(map[string]any{"command": "echo hi; pwd; id -u; hostname; echo $HOME; touch f930 && ls"})
	t.Logf("%s\n%v", r.Text, r.D)
	if r.str("status") != "completed" || r.str("host") != "sandbox" {
		t.Fatalf("want a completed sandbox run: %s %v", r.Text, r.D)
	}
	if !strings.Contains(r.Text, "conch-sandbox") || !strings.Contains(r.Text, se.ws) || !strings.Contains(r.Text, "/home/conch") {
		t.Fatalf("unexpected output: %s", r.Text)
	}
	if _, err := os.Stat(filepath.Join(se.ws, "f930")); err != nil {
		t.Fatalf("write inside the workspace did not reach the host: %v", err)
	}
}
