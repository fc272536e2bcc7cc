package e2etest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// GatedHome returns a home whose commands run on the gateway host through
// the policy gate, with an approvals file.
func GatedHome(t testing.TB, execCfg string, approvalsFile string) string {
	t.Helper()
	home := NewHome(t, `{"tools":{"exec":{"host":"gateway"`+execCfg+`}}}`)
	if approvalsFile != "" {
		if err := os.WriteFile(filepath.Join(home, "exec-approvals.json"), []byte(approvalsFile), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// CLI runs the conch binary with args and returns its combined output and
// exit code.
func CLI(t testing.TB, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(ConchBin, args...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}
