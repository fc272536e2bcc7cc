package e2etest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPgrepOtherRun: pgrep counts the processes this run started and
// leaves out those under another test binary or another run's marker.
func TestPgrepOtherRun(t *testing.T) {
	dir := t.TempDir()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	b, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "other.test")
	if err := os.WriteFile(fake, b, 0o755); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("99%d", os.Getpid())
	var unmarked []string // the environment of a run without a marker
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, runMarkerKey+"=") {
			unmarked = append(unmarked, kv)
		}
	}
	start := func(env []string, argv ...string) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	}
	// "; true" keeps the shell from exec'ing sleep: sleep stays its child.
	start(nil, "sh", "-c", "sleep "+tag+".1; true")
	start(unmarked, fake, "-c", "sleep "+tag+".2; true")
	start(append(unmarked, runMarkerKey+"=1"), "sh", "-c", "sleep "+tag+".3; true")
	Eventually(t, 10*time.Second, func() string {
		if n := len(Pgrep("^sleep " + tag + `\.`)); n != 1 {
			return fmt.Sprintf("%d of this run's sleeps, want 1", n)
		}
		if all, _ := exec.Command("pgrep", "-f", "^sleep "+tag+`\.`).Output(); len(strings.Fields(string(all))) != 3 {
			return fmt.Sprintf("sleeps running: %q", all)
		}
		return ""
	})
	if p := Pgrep("^sleep " + tag + `\.1`); len(p) != 1 {
		t.Fatalf("this run's sleep not counted: %v", p)
	}
}
