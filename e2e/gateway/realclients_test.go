package gateway

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// realClients are the MCP clients installed from npm for
// TestRealClientsConnect, pinned to versions known to work.
var realClients = map[string]string{
	"@anthropic-ai/claude-code": "2.1.197",
	"@google/gemini-cli":        "0.61.0",
}

// realClientsDir is where they are installed, kept between runs.
func realClientsDir(t *testing.T) string {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skipf("no home directory for the npm cache: %v", err)
	}
	return filepath.Join(home, ".cache", "conch-e2e-clients")
}

// installRealClients installs the pinned clients into dir unless they are
// there at those versions; it skips the test with the reason when npm or
// the registry is not reachable. The install is bounded in time.
func installRealClients(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skipf("npm not installed: %v", err)
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skipf("unshare not installed: %v", err)
	}
	missing := []string{}
	for pkg, v := range realClients {
		var m struct{ Version string }
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json"))
		if err != nil || json.Unmarshal(b, &m) != nil || m.Version != v {
			missing = append(missing, pkg+"@"+v)
		}
	}
	if len(missing) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "npm", "view", missing[0], "version").CombinedOutput(); err != nil {
		t.Skipf("npm registry not reachable (npm view %s: %v): %s", missing[0], err, lastLine(out))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", dir}, missing...)
	if out, err := exec.CommandContext(ctx, "npm", args...).CombinedOutput(); err != nil {
		t.Skipf("npm install %v: %v: %s", missing, err, lastLine(out))
	}
}

func lastLine(b []byte) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return l[len(l)-1]
}

// TestRealClientsConnect installs Claude Code and Gemini CLI from npm
// (pinned, cached under ~/.cache), registers conch with each over stdio
// and over HTTP with the commands docs/clients.md gives, and checks that
// each client's `mcp list` reports it connected. The clients run in a
// network namespace with only loopback (they try DNS at start); the HTTP
// gateway is reached inside it through a second `conch serve` started
// there.
func TestRealClientsConnect(t *testing.T) {
	dir := realClientsDir(t)
	installRealClients(t, dir)
	bin := filepath.Join(dir, "node_modules", ".bin")

	// One namespace for the clients and the gateway they talk to:
	// `unshare -n` runs a shell that starts conch serve, then the
	// client commands, so 127.0.0.1 is the namespace's own loopback.
	home := e2etest.NewHome(t, "")
	project := t.TempDir()
	clientHome := t.TempDir()
	trusted, _ := json.Marshal(map[string]string{project: "TRUST_FOLDER"})
	os.MkdirAll(filepath.Join(clientHome, ".gemini"), 0o700)
	os.WriteFile(filepath.Join(clientHome, ".gemini", "trustedFolders.json"), trusted, 0o600)

	script := `set -u
ip link set lo up 2>/dev/null || true
"$CONCH" serve --home "$CONCH_HOME_DIR" --listen 127.0.0.1:17878 > "$WORK/serve.out" 2>&1 &
serve=$!
trap 'kill $serve 2>/dev/null; wait $serve 2>/dev/null' EXIT
for i in $(seq 1 600); do grep -q 'listening on' "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
token=$(grep -o 'cat_[A-Za-z0-9_-]*' "$WORK/serve.out" | head -1)
[ -n "$token" ] || { echo "no token from conch serve:"; cat "$WORK/serve.out"; exit 3; }
cd "$PROJECT"
# docs/clients.md: Claude Code
"$BIN/claude" mcp add conch-stdio -- "$CONCH" mcp --home "$CONCH_HOME_DIR" >/dev/null
"$BIN/claude" mcp add --transport http conch-http http://127.0.0.1:17878/mcp --header "Authorization: Bearer $token" >/dev/null
echo "== claude"; "$BIN/claude" mcp list
# docs/clients.md: Gemini CLI (the folder is trusted above)
"$BIN/gemini" mcp add conch-stdio "$CONCH" mcp --home "$CONCH_HOME_DIR" >/dev/null
"$BIN/gemini" mcp add --transport http --header "Authorization: Bearer $token" conch-http http://127.0.0.1:17878/mcp >/dev/null
echo "== gemini"; "$BIN/gemini" mcp list
`
	ctx, cancel := context.WithTimeout(context.Background(), e2etest.Slow(3*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-n", "bash", "-c", script)
	cmd.Env = append(os.Environ(), "HOME="+clientHome, "CONCH="+e2etest.ConchBin, "CONCH_HOME_DIR="+home,
		"WORK="+t.TempDir(), "PROJECT="+project, "BIN="+bin, "CONCH_HOME=", "CONCH_GATEWAY=", "CONCH_TOKEN=")
	cmd.Dir = project
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("clients in a loopback-only namespace: %v\n%s", err, out)
	}
	text := string(out)
	claude, gemini, _ := strings.Cut(strings.TrimPrefix(text[strings.Index(text, "== claude"):], "== claude"), "== gemini")
	for _, c := range []struct{ client, list, mark string }{
		{"claude", claude, "✔ Connected"}, {"gemini", gemini, "Connected"},
	} {
		for _, name := range []string{"conch-stdio", "conch-http"} {
			ok := false
			for _, l := range strings.Split(c.list, "\n") {
				if strings.Contains(l, name) && strings.Contains(l, c.mark) && !strings.Contains(l, "Disconnected") {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s mcp list does not report %s connected:\n%s", c.client, name, c.list)
			}
		}
	}
}
