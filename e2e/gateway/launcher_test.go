package gateway

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// cgroup2Root returns the writable cgroup v2 mount with cgroup.kill, or
// skips the test.
func cgroup2Root(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skip("no /proc/self/mountinfo")
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		for i, w := range f {
			if w == "-" && i+1 < len(f) && f[i+1] == "cgroup2" {
				root := f[4]
				if _, err := os.Stat(filepath.Join(root, "cgroup.kill")); err != nil {
					// cgroup.kill exists in every non-root cgroup: probe one.
					probe := filepath.Join(root, "conch-probe-"+strconv.Itoa(os.Getpid()))
					if os.Mkdir(probe, 0o755) != nil {
						t.Skip("cgroup v2 is not writable here")
					}
					_, err := os.Stat(filepath.Join(probe, "cgroup.kill"))
					os.Remove(probe)
					if err != nil {
						t.Skip("cgroup v2 has no cgroup.kill here")
					}
				}
				return root
			}
		}
	}
	t.Skip("no cgroup v2 mount")
	return ""
}

// cgroupOf returns pid's cgroup v2 path.
func cgroupOf(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	return ""
}

// removeCgroup kills what is left in dir and removes it and its children.
func removeCgroup(dir string) {
	os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				removeCgroup(filepath.Join(dir, e.Name()))
			}
		}
		if os.Remove(dir) == nil || os.IsNotExist(os.Remove(dir)) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSupervisorLauncherSurvivesUnitKill stands in for a systemd service
// restart with the default KillMode=control-group: conch serve runs in a
// cgroup of its own (the unit), CONCH_SUPERVISOR_LAUNCHER names a wrapper
// that moves itself into another cgroup (the scope systemd-run --scope
// would create) and execs its arguments, and the whole unit cgroup is then
// killed at once. The session must keep running under its supervisor and
// be reattached by the next conch serve. (With the variable unset the
// supervisor is in the unit's cgroup and the kill ends the session lost.)
func TestSupervisorLauncherSurvivesUnitKill(t *testing.T) {
	root := cgroup2Root(t)
	tag := strconv.Itoa(os.Getpid())
	unit := filepath.Join(root, "conch-test-unit-"+tag)
	scope := filepath.Join(root, "conch-test-scope-"+tag)
	for _, d := range []string{unit, scope} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Skipf("cannot create a cgroup: %v", err)
		}
		t.Cleanup(func() { removeCgroup(d) })
	}
	dir := t.TempDir()
	launcher := filepath.Join(dir, "launcher")
	used := filepath.Join(dir, "launched")
	script := "#!/bin/sh\necho $$ > " + scope + "/cgroup.procs || exit 1\necho \"$@\" >> " + used + "\nexec \"$@\"\n"
	if err := os.WriteFile(launcher, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	home := e2etest.NewHome(t, "")
	start := func() (*exec.Cmd, string) {
		cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", unit,
			e2etest.ConchBin, "serve", "--home", home, "--listen", "127.0.0.1:0", "--log-level", "warn")
		cmd.Env = append(os.Environ(), "CONCH_SUPERVISOR_LAUNCHER="+launcher)
		out, _ := cmd.StdoutPipe()
		_, stderrFile := e2etest.NewLog(t, "conch serve")
		cmd.Stderr = stderrFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		sc := bufio.NewScanner(out)
		var base string
		for sc.Scan() {
			if m := e2etest.ListenRE.FindStringSubmatch(sc.Text()); m != nil {
				base = m[1]
				break
			}
		}
		go io.Copy(io.Discard, out)
		if base == "" {
			t.Fatal("conch serve did not start")
		}
		return cmd, base
	}
	cmd, base := start()
	b, err := os.ReadFile(filepath.Join(home, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	g := &e2etest.Gateway{T: t, Home: home, Base: base, Operator: strings.TrimSpace(string(b))}
	code, m := g.Do("POST", "/v1/exec", g.Operator, map[string]any{"command": "sleep 941.3", "background": true}, nil)
	if code != 200 {
		t.Fatalf("exec: %d %v", code, m)
	}
	id := m["details"].(map[string]any)["sessionId"].(string)
	sup := e2etest.SupervisorPID(t, home, id)
	if got, want := cgroupOf(sup), "/"+filepath.Base(scope); got != want {
		t.Fatalf("supervisor %d is in cgroup %q, want the launcher's %q", sup, got, want)
	}
	if b, _ := os.ReadFile(used); !strings.Contains(string(b), e2etest.ShimBin+" supervise --home "+home) {
		t.Fatalf("the launcher ran %q", b)
	}

	// "systemctl restart": every process of the unit's cgroup is killed.
	if err := os.WriteFile(filepath.Join(unit, "cgroup.kill"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("conch serve survived the unit's cgroup kill")
	}
	if e2etest.IsZombie(sup) {
		t.Fatalf("the supervisor died with the unit")
	}

	_, g.Base = start()
	code, m = g.Do("GET", "/v1/sessions/"+id, g.Operator, nil, nil)
	if code != 200 || m["state"] != "running" {
		t.Fatalf("after the restart the session is %d %v, want running", code, m)
	}
	if code, m := g.Do("POST", "/v1/sessions/"+id+"/kill", g.Operator, map[string]any{}, nil); code != 200 {
		t.Fatalf("kill after the restart: %d %v", code, m)
	}
}
