package state

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// errorDisk mounts a fresh 64 MiB ext4 image (mounted with
// errors=remount-ro) on a new directory and returns the directory and a
// function that makes the filesystem fail as after an I/O error: ext4
// records an error and the kernel turns it read-only at once, open files
// included (a plain `mount -o remount,ro` is refused while conch holds
// its lock files open). The test is skipped where this is not possible
// (not root, no loop devices, an ext4 without trigger_fs_error).
func errorDisk(t *testing.T) (dir string, fail func()) {
	t.Helper()
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 is not installed (e2fsprogs)")
	}
	img := filepath.Join(t.TempDir(), "home.img")
	dir = t.TempDir()
	if out, err := exec.Command("truncate", "-s", "64m", img).CombinedOutput(); err != nil {
		t.Fatalf("truncate: %v %s", err, out)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-O", "^has_journal", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop,errors=remount-ro", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount an ext4 image (needs root and loop devices): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	os.Chmod(dir, 0o700)
	out, err := exec.Command("findmnt", "-n", "-o", "SOURCE", "--target", dir).Output()
	dev := filepath.Base(strings.TrimSpace(string(out)))
	trigger := filepath.Join("/sys/fs/ext4", dev, "trigger_fs_error")
	if _, serr := os.Stat(trigger); err != nil || serr != nil {
		t.Skipf("no %s to fail the filesystem with: %v %v", trigger, err, serr)
	}
	return dir, func() {
		if err := os.WriteFile(trigger, []byte("conch test: the home fails\n"), 0o200); err != nil {
			t.Fatalf("trigger an ext4 error: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600); err == nil || !strings.Contains(err.Error(), "read-only file system") {
			t.Fatalf("the filesystem is still writable after an error: %v", err)
		}
	}
}

// TestHomeUnwritableIsAState makes the home's filesystem read-only under
// a running gateway, the way the kernel does after an I/O error: exec
// refuses new sessions with home_unwritable (HTTP 503) and starts
// nothing, /v1/health says degraded and why, /metrics and doctor show it
// (health and doctor used to say ok), and a session that ends meanwhile
// keeps its end state in its supervisor's memory. Then the home is made
// writable again (a read-only ext4 cannot be made writable in place, so
// the home's contents move to a fresh filesystem at the same path): the
// end state is written, exec works, health is ok.
func TestHomeUnwritableIsAState(t *testing.T) {
	for _, mode := range []string{"host", "process"} {
		t.Run(mode, func(t *testing.T) {
			homeUnwritableScenario(t, []string{"CONCH_SUPERVISOR=" + mode})
		})
	}
}

func homeUnwritableScenario(t *testing.T, env []string) {
	dir, fail := errorDisk(t)
	home := filepath.Join(dir, "home")
	seedHome(home)
	t.Cleanup(func() { e2etest.KillLeftovers(t, home) })
	g := e2etest.StartServe(t, home, env, "--listen", "127.0.0.1:0")

	// A session that prints nothing and ends with code 3 once told to.
	gate := filepath.Join(t.TempDir(), "go")
	_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "until [ -e " + gate + " ]; do sleep 0.05; done; exit 3", "background": true}, nil)
	d, _ := m["details"].(map[string]any)
	id, _ := d["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v", m)
	}
	if _, m = g.Do("GET", "/v1/health", "", nil, nil); m["status"] != "ok" {
		t.Fatalf("health before the failure: %v", m)
	}

	fail()

	// health shows the state by itself, before any exec found it out.
	e2etest.Eventually(t, 30*time.Second, func() string {
		code, m := g.Do("GET", "/v1/health", "", nil, nil)
		disk, _ := m["disk"].(map[string]any)
		reason, _ := disk["reason"].(string)
		if code != 200 || m["status"] != "degraded" || disk["unwritable"] != true || disk["code"] != "home_unwritable" || disk["full"] != false || !strings.Contains(reason, "read-only file system") {
			return "health on a read-only home: " + jsonText(m)
		}
		return ""
	})
	// exec refuses at once, with the code and the reason.
	start := time.Now()
	code, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo hi"}, nil)
	text, _ := m["text"].(string)
	if code != 503 || bodyCode(m) != "home_unwritable" || !strings.Contains(text, "cannot be written") || !strings.Contains(text, "read-only file system") {
		t.Fatalf("exec on a read-only home: %d %v", code, m)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("home_unwritable took %v", took)
	}
	out, code := e2etest.CLI(t, "exec", "--home", home, "--", "echo", "hi")
	if code == 0 || !strings.Contains(out, "cannot be written") {
		t.Fatalf("conch exec on a read-only home: exit %d: %s", code, out)
	}
	if m := metricsText(t, g); !strings.Contains(m, "conch_home_unwritable 1\n") || !strings.Contains(m, "conch_home_disk_full 0\n") {
		t.Fatalf("metrics on a read-only home:\n%s", m)
	}
	if out, _ := exec.Command(e2etest.ConchBin, "doctor", "--home", home).CombinedOutput(); !strings.Contains(string(out), "home.unwritable") {
		t.Fatalf("doctor does not report the read-only home:\n%s", out)
	}

	// The running session ends: its end state cannot be written and is
	// kept by its supervisor.
	os.WriteFile(gate, nil, 0o600)
	e2etest.Eventually(t, 60*time.Second, func() string {
		_, m := g.Do("POST", "/v1/sessions/"+id+"/poll", g.Token, map[string]any{}, nil)
		if d, _ := m["details"].(map[string]any); d["status"] != "failed" || d["exitCode"] != float64(3) {
			return "the session's end on a read-only home: " + jsonText(m)
		}
		return ""
	})
	exitPath := proto.ExitPath(proto.SessionDir(home, id))
	if _, err := os.Stat(exitPath); err == nil {
		t.Fatal("exit.json written on a read-only home: the test does not exercise the in-memory end state")
	}
	// The ledger's failed appends are logged: checked here, not printed.
	e2etest.Eventually(t, 10*time.Second, func() string {
		for _, r := range g.Stderr.Records("ledger append") {
			if strings.Contains(r, "read-only file system") {
				return ""
			}
		}
		return "no \"ledger append\" error naming the read-only file system in conch's stderr:\n" + g.Stderr.String()
	})

	// The home becomes writable again: its contents move to a fresh
	// filesystem mounted at the same path.
	fresh := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", fresh).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", fresh).Run() })
	if out, err := exec.Command("cp", "-a", home, fresh+"/").CombinedOutput(); err != nil {
		t.Fatalf("copy the home: %v %s", err, out)
	}
	if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "--move", fresh, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount --move: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })

	e2etest.Eventually(t, 60*time.Second, func() string {
		if _, m := g.Do("GET", "/v1/health", "", nil, nil); m["status"] != "ok" {
			return "health after the home is writable again: " + jsonText(m)
		}
		return ""
	})
	code, m = g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo hi"}, nil)
	if text, _ := m["text"].(string); code != 200 || text != "hi" {
		t.Fatalf("exec after the home is writable again: %d %v", code, m)
	}
	if m := metricsText(t, g); !strings.Contains(m, "conch_home_unwritable 0\n") {
		t.Fatalf("metrics after the home is writable again:\n%s", m)
	}
	// The end state kept in memory is written.
	e2etest.Eventually(t, 60*time.Second, func() string {
		ex, ok, err := proto.ReadExit(proto.SessionDir(home, id))
		if !ok || ex.ExitCode == nil || *ex.ExitCode != 3 {
			return "exit.json not written: " + errString(err)
		}
		return ""
	})
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// seedHome makes the home directory with the login-shell probe's cache,
// as e2etest.NewHome does: a refused exec would otherwise first wait up to half
// its yield window for the probe of a slow login shell.
func seedHome(home string) {
	os.MkdirAll(filepath.Join(home, "state"), 0o700)
	if e2etest.LoginCache != nil {
		os.WriteFile(filepath.Join(home, "state", "login-path.json"), e2etest.LoginCache, 0o600)
	}
}
