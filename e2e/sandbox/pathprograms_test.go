//go:build linux

package sandbox

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestSandboxGitDefaultProgramsInPATH: the gateway's PATH holds a
// directory of the workspace, and it holds `less` (git's default pager).
// A bwrap-sandboxed command that replaces it, or plants the other
// default programs, must leave the host's `git log` running the real
// pager: the present one is protected (read-only inside, checked after),
// and the run's result warns
// of the PATH directory (a missing program there cannot be protected
// without leaving a file in the user's directory).
func TestSandboxGitDefaultProgramsInPATH(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	root := t.TempDir()
	ws, markers := filepath.Join(root, "ws"), filepath.Join(root, "markers")
	bin := filepath.Join(ws, "tools", "bin")
	os.MkdirAll(bin, 0o755)
	os.MkdirAll(markers, 0o777)
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	real, err := exec.LookPath("cat")
	if err != nil {
		t.Fatal(err)
	}
	// A harmless pager of the user's, as a tool directory would hold.
	if err := os.WriteFile(filepath.Join(bin, "less"), []byte("#!/bin/sh\nexec "+real+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")
	conf, _ := json.Marshal(map[string]any{"sandbox": map[string]any{"mode": "all", "backend": "bwrap"},
		"agents": map[string]any{"main": map[string]any{"workspace": ws}}})
	home := e2etest.NewHome(t, string(conf))
	c := e2etest.StartConchEnv(t, home, []string{path})
	mark := filepath.Join(markers, "less-ran")
	r := c.Exec(map[string]any{"command": "printf '#!/bin/sh\\ntouch " + mark + "\\ncat\\n' > " + filepath.Join(bin, "less") + " 2>&1; echo attempted"})
	t.Logf("sandboxed run: %q", r.Text)
	if !strings.Contains(r.Text, "attempted") {
		t.Fatalf("the sandboxed run: %q", r.Text)
	}
	if !strings.Contains(r.Text, "the gateway's PATH holds "+bin+", inside the workspace") {
		t.Errorf("the result does not warn of the PATH directory in the workspace: %q", r.Text)
	}
	// What the host runs as `less` with that PATH (git's default pager
	// is found the same way).
	host := exec.Command("sh", "-c", "echo x | less")
	host.Env = append(os.Environ(), path)
	out, _ := host.CombinedOutput()
	if _, err := os.Stat(mark); err == nil {
		t.Fatalf("the planted pager ran on the host: %s", out)
	}
	b, _ := os.ReadFile(filepath.Join(bin, "less"))
	if strings.Contains(string(b), mark) {
		t.Errorf("the sandboxed command replaced %s: %q", filepath.Join(bin, "less"), b)
	}
}
