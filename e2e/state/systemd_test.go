package state

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestSystemdUnits checks the shipped units in contrib/systemd: no
// KillMode=process or none (systemd advises against both; supervisors
// leave the service's cgroup through the launcher instead), a launcher that
// runs its command in place (systemd-run --scope: a transient service would
// fork it away from the descriptors conch hands over), and, where
// systemd-analyze is installed, a clean `systemd-analyze verify` in the
// system and the user manager's view.
func TestSystemdUnits(t *testing.T) {
	dir := filepath.Join("..", "..", "contrib", "systemd")
	units, _ := filepath.Glob(filepath.Join(dir, "*.service"))
	slices, _ := filepath.Glob(filepath.Join(dir, "*.slice"))
	if len(units) < 2 {
		t.Fatalf("units in %s: %v", dir, units)
	}
	launcherRE := regexp.MustCompile(`(?m)^Environment="CONCH_SUPERVISOR_LAUNCHER=([^"]*)"$`)
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if regexp.MustCompile(`(?m)^KillMode=(process|none)`).MatchString(s) {
			t.Errorf("%s uses KillMode=process or none", u)
		}
		m := launcherRE.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("%s sets no CONCH_SUPERVISOR_LAUNCHER", u)
			continue
		}
		w := strings.Fields(m[1])
		if w[0] != "systemd-run" || !contains(w, "--scope") || !contains(w, "--property=Delegate=yes") {
			t.Errorf("%s: launcher %q must be systemd-run --scope with a delegated cgroup", u, m[1])
		}
		var slice string
		for _, a := range w {
			if v, ok := strings.CutPrefix(a, "--slice="); ok {
				slice = v
			}
		}
		if _, err := os.Stat(filepath.Join(dir, slice)); slice == "" || err != nil {
			t.Errorf("%s: the launcher's slice %q is not shipped next to it", u, slice)
		}
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed; unit syntax not verified")
	}
	// verify wants ExecStart to exist: point it at the binary under test.
	tmp := t.TempDir()
	for _, f := range append(units, slices...) {
		b, _ := os.ReadFile(f)
		b = []byte(strings.ReplaceAll(string(b), "/usr/local/bin/conch", e2etest.ConchBin))
		os.WriteFile(filepath.Join(tmp, filepath.Base(f)), b, 0o644)
	}
	names := []string{}
	for _, f := range append(units, slices...) {
		names = append(names, filepath.Base(f))
	}
	rt := filepath.Join(tmp, "runtime")
	os.Mkdir(rt, 0o700)
	for _, mode := range [][]string{{"verify"}, {"--user", "verify"}} {
		cmd := exec.Command("systemd-analyze", append(mode, names...)...)
		cmd.Dir = tmp
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
		if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze %v: %v\n%s", mode, err, out)
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
