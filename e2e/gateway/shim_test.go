package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// gatedOff runs every command on the gateway without a gate, so the tests
// below watch the process chain only.
const gatedOff = `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`

// exeOf is the executable of process pid.
func exeOf(t *testing.T, pid int) string {
	t.Helper()
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// doctorFinding returns the message of conch doctor's finding id ("" if
// none) for home, run by bin with env.
func doctorFinding(t *testing.T, bin, home string, env []string, id string) string {
	t.Helper()
	cmd := exec.Command(bin, "doctor", "--json", "--home", home)
	cmd.Env = env
	out, _ := cmd.Output() // exit 1 on warnings: the JSON is there either way
	var fs []struct{ ID, Message string }
	if err := json.Unmarshal(out, &fs); err != nil {
		t.Fatalf("conch doctor --json: %v: %s", err, out)
	}
	for _, f := range fs {
		if f.ID == id {
			return f.Message
		}
	}
	return ""
}

// TestShimRunsTheSupervisors: with conch-shim beside conch (as `go
// install ./cmd/...` puts them), a session's supervisor is the shim, and
// conch doctor names it.
func TestShimRunsTheSupervisors(t *testing.T) {
	home := e2etest.NewHome(t, gatedOff)
	g := e2etest.StartGateway(t, home)
	if strings.Contains(g.Banner, "conch-shim") {
		t.Fatalf("banner mentions the shim although it runs: %q", g.Banner)
	}
	_, m := g.Tool("exec", map[string]any{"command": "sleep 2", "background": true})
	id, _ := e2etest.Details(m)["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v", m)
	}
	if exe := exeOf(t, e2etest.SupervisorPID(t, home, id)); exe != e2etest.ShimBin {
		t.Fatalf("the supervisor runs %s, want %s", exe, e2etest.ShimBin)
	}
	if msg := doctorFinding(t, e2etest.ConchBin, home, os.Environ(), "shim"); !strings.Contains(msg, e2etest.ShimBin) {
		t.Fatalf("conch doctor's shim finding: %q", msg)
	}
}

// TestShimFallbackReported: a conch with no conch-shim beside it or on
// PATH runs its commands under itself, and says so with the fix in one
// line of the serve banner and in conch doctor.
func TestShimFallbackReported(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "conch")
	copyExe(t, e2etest.ConchBin, bin)
	env := append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "CONCH_SHIM=")
	for _, d := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		if _, err := os.Stat(filepath.Join(d, "conch-shim")); err == nil {
			t.Skipf("a conch-shim is installed in %s", d)
		}
	}
	home := e2etest.NewHome(t, gatedOff)
	cmd := exec.Command(bin, "serve", "--home", home, "--listen", "127.0.0.1:0", "--log-level", "warn")
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &e2etest.Gateway{T: t, Home: home, Cmd: cmd}
	t.Cleanup(g.Stop)
	sc := bufio.NewScanner(out)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if tok := strings.TrimSpace(sc.Text()); strings.HasPrefix(tok, "cat_") && g.Token == "" {
			g.Token = tok
		}
		if m := e2etest.ListenRE.FindStringSubmatch(sc.Text()); m != nil {
			g.Base = m[1]
			break
		}
	}
	go io.Copy(io.Discard, out)
	if g.Base == "" {
		t.Fatalf("conch serve did not start: %q", lines)
	}
	note := 0
	for _, l := range lines {
		if strings.Contains(l, "no conch-shim beside") && strings.Contains(l, "go install ./cmd/...") {
			note++
		}
	}
	if note != 1 {
		t.Fatalf("the banner has %d lines on the missing shim: %q", note, lines)
	}
	b, err := os.ReadFile(filepath.Join(home, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	g.Operator = strings.TrimSpace(string(b))
	_, m := g.Tool("exec", map[string]any{"command": "echo fallback-ok; sleep 2", "yieldMs": 1000})
	id, _ := e2etest.Details(m)["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v", m)
	}
	if exe := exeOf(t, e2etest.SupervisorPID(t, home, id)); exe != bin {
		t.Fatalf("the supervisor runs %s, want the conch binary %s", exe, bin)
	}
	if msg := doctorFinding(t, bin, home, env, "shim.missing"); !strings.Contains(msg, "go install ./cmd/...") {
		t.Fatalf("conch doctor's shim.missing finding: %q", msg)
	}
}

func copyExe(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
