//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	"golang.org/x/sys/unix"
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
	c                  *e2etest.Conch
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
	se.home = e2etest.NewHome(t, string(conf))
	os.WriteFile(filepath.Join(se.home, "secret.txt"), []byte("CONCH-HOME-SECRET\n"), 0o600)
	se.c = e2etest.StartConchEnv(t, se.home, []string{"HOME=" + se.userHome, "LEAK930=gateway-env"})
	return se
}

func TestSandboxBasics(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, nil)
	r := se.c.Exec(map[string]any{"command": "echo hi; pwd; id -u; hostname; echo $HOME; touch f930 && ls"})
	t.Logf("%s\n%v", r.Text, r.D)
	if r.Str("status") != "completed" || r.Str("host") != "sandbox" {
		t.Fatalf("want a completed sandbox run: %s %v", r.Text, r.D)
	}
	if !strings.Contains(r.Text, "conch-sandbox") || !strings.Contains(r.Text, se.ws) || !strings.Contains(r.Text, "/home/conch") {
		t.Fatalf("unexpected output: %s", r.Text)
	}
	if _, err := os.Stat(filepath.Join(se.ws, "f930")); err != nil {
		t.Fatalf("write inside the workspace did not reach the host: %v", err)
	}
	// Environment of a sandboxed run: request env as given, PATH
	// through CONCH_PREPEND_PATH, nothing of the gateway's environment.
	r = se.c.Exec(map[string]any{"command": `echo "P=$PATH"; echo "F=$FOO930 N=$NODE_OPTIONS C=$CONCH_PREPEND_PATH S=$CONCH_SHELL"; env | grep -c LEAK930 || true`,
		"env": map[string]any{"FOO930": "bar", "NODE_OPTIONS": "--x930", "PATH": "/opt/p930"}})
	if !strings.HasPrefix(r.Text, "P=/opt/p930:") || r.Text[strings.Index(r.Text, "\n"):] != "\nF=bar N=--x930 C= S=exec\n0" {
		t.Fatalf("sandbox environment: %q", r.Text)
	}
}

// TestSandboxEscapes runs attempts that must fail from inside the bwrap
// sandbox (issue 7's proof list).
func TestSandboxEscapes(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, nil)
	outside := filepath.Join(filepath.Dir(se.ws), "outside930")

	// A host listener on loopback that must never see a connection.
	port, accepted := hostListener(t)

	// A host process that must stay invisible and unsignalable.
	host := exec.Command("sleep", "930.1")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { host.Process.Kill(); host.Wait() }()
	hostPid := host.Process.Pid

	cases := []struct {
		name, cmd string
		check     func(r e2etest.Result) string
	}{
		{"write outside the workspace", "echo pwned > " + outside + "; echo pwned > /usr/pwned930; echo pwned > " + filepath.Join(se.home, "pwned930"), func(r e2etest.Result) string {
			for _, p := range []string{outside, "/usr/pwned930", filepath.Join(se.home, "pwned930")} {
				if _, err := os.Stat(p); err == nil {
					os.Remove(p)
					return p + " was written"
				}
			}
			return ""
		}},
		{"read ~/.ssh", "cat " + filepath.Join(se.userHome, ".ssh", "id_ed25519") + "; test -d " + filepath.Join(se.userHome, ".ssh") + " && echo SSH-DIR-VISIBLE", func(r e2etest.Result) string {
			if strings.Contains(r.Text, "SECRET-KEY-930") || strings.Contains(r.Text, "SSH-DIR-VISIBLE") {
				return "the user's ~/.ssh is readable"
			}
			return ""
		}},
		{"read the conch home", "cat " + filepath.Join(se.home, "secret.txt") + " " + filepath.Join(se.home, "config.json") + "; test -e " + filepath.Join(se.home, "sessions") + " && echo CONCH-HOME-VISIBLE", func(r e2etest.Result) string {
			if strings.Contains(r.Text, "CONCH-HOME-SECRET") || strings.Contains(r.Text, "\"mode\"") || strings.Contains(r.Text, "CONCH-HOME-VISIBLE") {
				return "the conch home is readable"
			}
			return ""
		}},
		{"reach host loopback", fmt.Sprintf("bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' && echo CONNECTED", port), func(r e2etest.Result) string {
			if strings.Contains(r.Text, "CONNECTED") {
				return "connected to the host's loopback"
			}
			return ""
		}},
		{"reach the network", "bash -c 'echo > /dev/tcp/1.1.1.1/53' && echo CONNECTED; ip -o link 2>/dev/null | grep -v ' lo:' | grep -c link/ether", func(r e2etest.Result) string {
			if strings.Contains(r.Text, "CONNECTED") {
				return "reached the network"
			}
			return ""
		}},
		{"see host processes", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'", func(r e2etest.Result) string {
			if strings.Contains(r.Text, "930.1") || strings.Contains(r.Text, "conch mcp") {
				return "host processes are visible"
			}
			return ""
		}},
		{"signal a host process", fmt.Sprintf("kill -9 %d", hostPid), func(r e2etest.Result) string {
			time.Sleep(100 * time.Millisecond)
			if host.ProcessState != nil || syscall.Kill(hostPid, 0) != nil || e2etest.IsZombie(hostPid) {
				return "the host process was killed"
			}
			return ""
		}},
		{"fill the host /tmp", "dd if=/dev/zero of=/tmp/fill930 bs=1M count=8 2>&1; ls -la /tmp", func(r e2etest.Result) string {
			if _, err := os.Stat("/tmp/fill930"); err == nil {
				os.Remove("/tmp/fill930")
				return "wrote to the host /tmp"
			}
			return ""
		}},
		{"host sockets", "ls /run /var/run /tmp/.X11-unix 2>&1; ls /run/conch", func(r e2etest.Result) string {
			if strings.Contains(r.Text, "docker.sock") || strings.Contains(r.Text, "dbus") || strings.Contains(r.Text, ".sock") {
				return "host sockets are visible"
			}
			return ""
		}},
	}
	for _, tc := range cases {
		r := se.c.Exec(map[string]any{"command": tc.cmd})
		if r.Str("host") != "sandbox" {
			t.Fatalf("%s: not sandboxed: %s %v", tc.name, r.Text, r.D)
		}
		if msg := tc.check(r); msg != "" {
			t.Errorf("%s: %s\n%s", tc.name, msg, r.Text)
		}
		t.Logf("%s:\n%s", tc.name, r.Text)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host listener accepted %d connections from the sandbox", n)
	}
}

// TestSandboxKillTakesEverything: a daemonised child (setsid, nohup,
// double fork) inside the sandbox dies with the session.
func TestSandboxKillTakesEverything(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, nil)
	r := se.c.Exec(map[string]any{"command": "(setsid nohup sh -c 'sleep 931.1' >/dev/null 2>&1 &); sleep 931.2", "background": true})
	id := r.Str("sessionId")
	if id == "" || r.Str("host") != "sandbox" {
		t.Fatalf("background: %s %v", r.Text, r.D)
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 931.1")) == 0 || len(e2etest.Pgrep("^sleep 931.2")) == 0 {
			return "sleeps not started"
		}
		return ""
	})
	k := se.c.Process(map[string]any{"action": "kill", "sessionId": id})
	t.Log(k.Text)
	end := se.c.WaitEnd(id, 15*time.Second)
	if end.Str("state") != "killed" {
		t.Fatalf("state: %s %v", end.Text, end.D)
	}
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep("^sleep 931"); len(p) != 0 {
			return fmt.Sprintf("still alive after kill: %v", p)
		}
		if p := e2etest.Pgrep("bwrap .*931"); len(p) != 0 {
			return fmt.Sprintf("bwrap still alive after kill: %v", p)
		}
		return ""
	})
}

// TestSandboxPTYJobControl: a PTY session inside bwrap has a controlling
// terminal (the run's PTY, claimed by sandbox-init --ctty in a session of
// its own), so an interactive bash gets job control.
func TestSandboxPTYJobControl(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, nil)
	r := se.c.Exec(map[string]any{"command": "test -t 0 && test -t 1 && stty size && echo $TERM && ps -o stat= -p $$", "pty": true})
	if r.Str("status") != "completed" || !strings.Contains(r.Text, "30 120") || !strings.Contains(r.Text, "+") {
		t.Fatalf("pty in sandbox: %q %v", r.Text, r.D)
	}
	r = se.c.Exec(map[string]any{"command": "bash --norc -i", "pty": true, "background": true})
	id := r.Str("sessionId")
	if id == "" {
		t.Fatalf("background pty: %s", r.Text)
	}
	se.c.Process(map[string]any{"action": "write", "sessionId": id, "data": "sleep 932.1 &\njobs; echo JOBS-DONE\n"})
	e2etest.Eventually(t, 10*time.Second, func() string {
		l := se.c.Process(map[string]any{"action": "log", "sessionId": id})
		if !strings.Contains(l.Text, "Running") || !strings.Contains(l.Text, "JOBS-DONE\n") {
			return "jobs: " + l.Text
		}
		if strings.Contains(l.Text, "no job control") || strings.Contains(l.Text, "cannot set terminal process group") {
			t.Fatalf("no job control inside the sandbox: %s", l.Text)
		}
		return ""
	})
	// C-c reaches the foreground job through the terminal.
	se.c.Process(map[string]any{"action": "write", "sessionId": id, "data": "sleep 932.2\n"})
	e2etest.Eventually(t, 10*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 932.2")) == 0 {
			return "sleep 932.2 not started"
		}
		return ""
	})
	se.c.Process(map[string]any{"action": "send-keys", "sessionId": id, "keys": []any{"C-c"}})
	e2etest.Eventually(t, 10*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 932.2")) != 0 {
			return "sleep 932.2 survived C-c"
		}
		return ""
	})
	se.c.Process(map[string]any{"action": "write", "sessionId": id, "data": "echo AFTER-$?\n"})
	e2etest.Eventually(t, 10*time.Second, func() string {
		if l := se.c.Process(map[string]any{"action": "log", "sessionId": id}); !strings.Contains(l.Text, "AFTER-130") {
			return "C-c: " + l.Text
		}
		return ""
	})
	sc := se.c.Process(map[string]any{"action": "screen", "sessionId": id})
	if !strings.Contains(sc.Text, "AFTER-130") {
		t.Errorf("screen: %s", sc.Text)
	}
	se.c.Process(map[string]any{"action": "kill", "sessionId": id})
	se.c.WaitEnd(id, 10*time.Second)
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep("^sleep 932"); len(p) != 0 {
			return fmt.Sprintf("left: %v", p)
		}
		return ""
	})
}

// TestSandboxProcessActions: background sessions inside the sandbox take
// every process action; timeouts apply.
func TestSandboxProcessActions(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, nil)
	c := se.c
	r := c.Exec(map[string]any{"command": "echo ready; while read l; do echo got:$l; done; echo bye; exit 3", "background": true})
	id := r.Str("sessionId")
	if id == "" || r.Str("host") != "sandbox" {
		t.Fatalf("background: %s %v", r.Text, r.D)
	}
	c.Process(map[string]any{"action": "write", "sessionId": id, "data": "one\ntwo\n"})
	e2etest.Eventually(t, 5*time.Second, func() string {
		if l := c.Process(map[string]any{"action": "log", "sessionId": id}); l.Text != "ready\ngot:one\ngot:two" {
			return "log: " + l.Text
		}
		return ""
	})
	if s := c.Process(map[string]any{"action": "search", "sessionId": id, "pattern": "got:t"}); !strings.Contains(s.Text, "got:two") {
		t.Fatalf("search: %s", s.Text)
	}
	if ls := c.Process(map[string]any{"action": "list"}); !strings.Contains(ls.Text, id) {
		t.Fatalf("list: %s", ls.Text)
	}
	c.Process(map[string]any{"action": "write", "sessionId": id, "data": "three\n", "eof": true})
	w := c.Process(map[string]any{"action": "wait", "sessionId": id, "timeout": 10000})
	if !strings.Contains(w.Text, "got:three") && w.Num("exitCode") != 3 {
		t.Logf("wait: %s %v", w.Text, w.D)
	}
	p := c.WaitEnd(id, 10*time.Second)
	if p.Num("exitCode") != 3 {
		t.Fatalf("end: %s %v", p.Text, p.D)
	}
	// Timeout.
	tr := c.Exec(map[string]any{"command": "sleep 933.1", "timeout": 1})
	if tr.Str("status") != "failed" || !strings.Contains(tr.Text, "timed out") {
		t.Fatalf("timeout: %s %v", tr.Text, tr.D)
	}
	if p := e2etest.Pgrep("^sleep 933.1"); len(p) != 0 {
		t.Fatalf("left after timeout: %v", p)
	}
}

// TestSandboxRestartSurvival: a sandboxed session outlives conch and is
// killed completely after the restart.
func TestSandboxRestartSurvival(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, nil)
	r := se.c.Exec(map[string]any{"command": "echo up; sleep 934.1 & sleep 934.2", "background": true})
	id := r.Str("sessionId")
	e2etest.Eventually(t, 10*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 934.2")) == 0 {
			return "not started"
		}
		return ""
	})
	se.c.Kill9()
	c := e2etest.StartConchEnv(t, se.home, []string{"HOME=" + se.userHome})
	if l := c.Process(map[string]any{"action": "log", "sessionId": id}); l.Text != "up" || l.Str("status") != "running" {
		t.Fatalf("after restart: %q %v", l.Text, l.D)
	}
	c.Process(map[string]any{"action": "kill", "sessionId": id})
	c.WaitEnd(id, 10*time.Second)
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep("^sleep 934"); len(p) != 0 {
			return fmt.Sprintf("left: %v", p)
		}
		return ""
	})
}

// TestSandboxLimits: pids and memory limits apply through the session
// cgroups and are reported in the result.
func TestSandboxLimits(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, map[string]any{"limits": map[string]any{"pids": 16, "memoryBytes": 64 << 20, "cpus": 0.5}})
	r := se.c.Exec(map[string]any{"command": "for i in $(seq 40); do sleep 0.5 & done; wait; echo done", "timeout": 20})
	sb, _ := r.D["sandbox"].(map[string]any)
	lim, _ := sb["limits"].(map[string]any)
	warn, _ := r.D["warnings"].([]any)
	if lim["pids"] == nil {
		if len(warn) == 0 {
			t.Fatalf("pids limit neither enforced nor reported: %v", r.D)
		}
		t.Skipf("limits unavailable here: %v", warn)
	}
	if !strings.Contains(strings.ToLower(r.Text), "fork") && !strings.Contains(r.Text, "Resource temporarily unavailable") {
		t.Fatalf("pids limit 16 allowed 40 processes: %s", r.Text)
	}
	if lim["memoryBytes"] != nil {
		// tail must hold the whole 200 MB line; killed, it passes nothing on.
		m := se.c.Exec(map[string]any{"command": "head -c 200000000 /dev/zero | tail -n 1 | wc -c"})
		if strings.Contains(m.Text, "200000000") {
			t.Fatalf("memory limit 64 MiB let tail hold 200 MB: %s", m.Text)
		}
	}
}

// TestSandboxHostSelection covers host selection (implicit and explicit
// sandbox, gateway, the implicit fallback) with sandboxing on, off and
// unusable.
func TestSandboxHostSelection(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	errCode := func(r e2etest.Result) string {
		e, _ := r.D["error"].(map[string]any)
		s, _ := e["code"].(string)
		return s
	}
	// Sandboxing off: implicit host runs on the gateway (marked), an
	// explicit host=sandbox fails closed.
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"agents":{"main":{"workspace":"`+ws+`"}}}`))
	if r := c.Exec(map[string]any{"command": "echo x"}); r.Str("hostReason") != "implicit-sandbox-off" {
		t.Fatalf("implicit: %v", r.D)
	}
	if r := c.Exec(map[string]any{"command": "echo x", "host": "sandbox"}); errCode(r) != "sandbox_unavailable" {
		t.Fatalf("explicit sandbox with sandboxing off: %s %v", r.Text, r.D)
	}
	// Sandboxing on, backend unusable (bwrap missing): fail closed with
	// the reason, even for the implicit host.
	c = e2etest.StartConch(t, e2etest.NewHome(t, `{"sandbox":{"mode":"all","backend":"bwrap","bwrap":{"path":"/nonexistent/bwrap930"}},"agents":{"main":{"workspace":"`+ws+`"}}}`))
	r := c.Exec(map[string]any{"command": "echo x"})
	if errCode(r) != "sandbox_unavailable" || !strings.Contains(r.Text, "bubblewrap (bwrap) is not installed") {
		t.Fatalf("missing bwrap: %s %v", r.Text, r.D)
	}
	// non-main: the main agent is not sandboxed.
	c = e2etest.StartConch(t, e2etest.NewHome(t, `{"sandbox":{"mode":"non-main","backend":"bwrap","bwrap":{"path":"/nonexistent/bwrap930"}},"agents":{"main":{"workspace":"`+ws+`"}}}`))
	if r := c.Exec(map[string]any{"command": "echo x"}); r.Str("status") != "completed" || r.Str("hostReason") != "implicit-sandbox-off" {
		t.Fatalf("non-main, agent main: %s %v", r.Text, r.D)
	}
	needBwrap(t)
	// Sandboxing on: host=gateway is not allowed unless configured.
	c = e2etest.StartConch(t, e2etest.NewHome(t, `{"sandbox":{"mode":"all","backend":"bwrap"},"agents":{"main":{"workspace":"`+ws+`"}}}`))
	if r := c.Exec(map[string]any{"command": "echo x", "host": "gateway"}); errCode(r) != "host_not_allowed" {
		t.Fatalf("gateway while sandboxed: %s %v", r.Text, r.D)
	}
	if r := c.Exec(map[string]any{"command": "echo x", "host": "sandbox"}); r.Str("host") != "sandbox" || r.Text != "x" {
		t.Fatalf("explicit sandbox: %s %v", r.Text, r.D)
	}
	// Elevated is refused unless allowed; allowed with
	// default full it runs on the gateway without the gate.
	if r := c.Exec(map[string]any{"command": "echo x", "elevated": true}); errCode(r) != "elevated_unavailable" || !strings.Contains(r.Text, "runtime=sandboxed") {
		t.Fatalf("elevated not allowed: %s %v", r.Text, r.D)
	}
	c = e2etest.StartConch(t, e2etest.NewHome(t, `{"sandbox":{"mode":"all","backend":"bwrap"},"agents":{"main":{"workspace":"`+ws+`","elevated":{"allow":true,"default":"full"}}}}`))
	if r := c.Exec(map[string]any{"command": "hostname", "elevated": true}); r.Str("host") != "gateway" || r.Str("hostReason") != "elevated-full" || r.Text == "conch-sandbox" {
		t.Fatalf("elevated full: %s %v", r.Text, r.D)
	}
	if r := c.Exec(map[string]any{"command": "hostname", "elevated": false}); r.Str("host") != "sandbox" || r.Text != "conch-sandbox" {
		t.Fatalf("elevated false: %s %v", r.Text, r.D)
	}
	// A workspace that contains the conch home is never mounted.
	root := t.TempDir()
	home := filepath.Join(root, "home")
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"sandbox":{"mode":"all","backend":"bwrap"},"agents":{"main":{"workspace":"`+root+`"}}}`), 0o600)
	t.Cleanup(func() { e2etest.KillLeftovers(t, home) })
	c = e2etest.StartConch(t, home)
	if r := c.Exec(map[string]any{"command": "echo x"}); errCode(r) != "sandbox_unavailable" || !strings.Contains(r.Text, "contains") {
		t.Fatalf("unsafe workspace: %s %v", r.Text, r.D)
	}
}

// TestSandboxWorkspaceModes: ro refuses writes, none gives a private
// workspace, /workspace maps paths, protectPaths are read-only, network
// open reaches the host loopback.
func TestSandboxWorkspaceModes(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	ro := newSandbox(t, map[string]any{"workspaceAccess": "ro"})
	os.WriteFile(filepath.Join(ro.ws, "in.txt"), []byte("visible\n"), 0o644)
	if r := ro.c.Exec(map[string]any{"command": "cat in.txt; echo x > out.txt"}); !strings.Contains(r.Text, "visible") || !strings.Contains(r.Text, "Read-only") {
		t.Fatalf("ro: %s", r.Text)
	}
	none := newSandbox(t, map[string]any{"workspaceAccess": "none"})
	os.WriteFile(filepath.Join(none.ws, "in.txt"), []byte("visible\n"), 0o644)
	r := none.c.Exec(map[string]any{"command": "ls; echo private > p.txt; pwd"})
	if strings.Contains(r.Text, "in.txt") || !strings.Contains(r.Text, filepath.Join("sandboxes", "agent-main", "workspace")) {
		t.Fatalf("none: %s", r.Text)
	}
	mapped := newSandbox(t, map[string]any{"workspacePath": "/workspace", "network": "open"})
	os.MkdirAll(filepath.Join(mapped.ws, "sub", ".git", "hooks"), 0o755)
	os.MkdirAll(filepath.Join(mapped.ws, ".git", "hooks"), 0o755)
	// The error goes to stdout too: stdout and stderr are two pipes read
	// by two pumps, so text written to both microseconds apart may arrive
	// in either order, and dash writes its error in two pieces, between
	// which pwd's line could land.
	r = mapped.c.Exec(map[string]any{"command": "{ echo x > .git/hooks/pre-commit; } 2>&1; echo y > ok.txt; pwd", "workdir": "/workspace"})
	sb, _ := r.D["sandbox"].(map[string]any)
	if !strings.Contains("\n"+r.Text+"\n", "\n/workspace\n") || !strings.Contains(r.Text, "Read-only") || sb["workspace"] != "/workspace" || sb["hostWorkspace"] != mapped.ws {
		t.Fatalf("workspacePath /workspace: %s %v", r.Text, r.D)
	}
	if _, err := os.Stat(filepath.Join(mapped.ws, "ok.txt")); err != nil {
		t.Fatalf("write through /workspace: %v", err)
	}
	if r := mapped.c.Exec(map[string]any{"command": "pwd", "workdir": "/workspace/sub"}); r.Text != "/workspace/sub" {
		t.Fatalf("mapped workdir: %s", r.Text)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("HELLO-930\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	if r := mapped.c.Exec(map[string]any{"command": fmt.Sprintf("bash -c 'cat < /dev/tcp/127.0.0.1/%d'", port)}); !strings.Contains(r.Text, "HELLO-930") {
		t.Fatalf("network open: %s", r.Text)
	}
}

// needLandlock skips when the kernel offers no Landlock: the probe is
// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION), which
// returns the ABI version (securityfs and /sys/kernel/security/lsm are
// not always mounted).
func needLandlock(t *testing.T) {
	t.Helper()
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1)
	if errno != 0 || int(abi) < 1 {
		t.Skipf("the kernel offers no Landlock (landlock_create_ruleset: %v)", errno)
	}
}

// TestSandboxLandlock runs the escape attempts against the daemon-less
// fallback (Landlock + seccomp applied by sandbox-init).
func TestSandboxLandlock(t *testing.T) {
	needLandlock(t)
	t.Parallel()
	se := newSandbox(t, map[string]any{"backend": "landlock", "limits": map[string]any{"pids": 16}})
	outside := filepath.Join(filepath.Dir(se.ws), "outside930")
	port, accepted := hostListener(t)
	host := exec.Command("sleep", "936.1")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { host.Process.Kill(); host.Wait() }()

	r := se.c.Exec(map[string]any{"command": "echo inside > ok.txt && cat ok.txt; echo $HOME; touch $HOME/h && echo home-ok; touch $TMPDIR/t && echo tmp-ok"})
	sb, _ := r.D["sandbox"].(map[string]any)
	if r.Str("host") != "sandbox" || sb["backend"] != "landlock" || !strings.Contains(r.Text, "inside") || !strings.Contains(r.Text, "home-ok") || !strings.Contains(r.Text, "tmp-ok") {
		t.Fatalf("landlock run: %s %v", r.Text, r.D)
	}
	t.Logf("layers: %v", sb["layers"])
	if lim, _ := sb["limits"].(map[string]any); lim["pids"] != nil {
		f := se.c.Exec(map[string]any{"command": "for i in $(seq 40); do sleep 0.5 & done; wait; echo done", "timeout": 20})
		if !strings.Contains(strings.ToLower(f.Text), "fork") {
			t.Errorf("pids limit 16 under landlock allowed 40 processes: %s", f.Text)
		}
	}
	cmd := strings.Join([]string{
		"echo pwned > " + outside,
		"echo pwned > /tmp/fill936",
		"cat " + filepath.Join(se.userHome, ".ssh", "id_ed25519"),
		"cat " + filepath.Join(se.home, "secret.txt"),
		fmt.Sprintf("bash -c 'echo > /dev/tcp/127.0.0.1/%d' && echo CONNECTED", port),
		fmt.Sprintf("kill -9 %d && echo SIGNALLED", host.Process.Pid),
		"echo done",
	}, "; ")
	r = se.c.Exec(map[string]any{"command": cmd})
	t.Log(r.Text)
	for _, p := range []string{outside, "/tmp/fill936"} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was written from the landlock sandbox", p)
		}
	}
	if strings.Contains(r.Text, "SECRET-KEY-930") || strings.Contains(r.Text, "CONCH-HOME-SECRET") {
		t.Errorf("secrets readable: %s", r.Text)
	}
	if strings.Contains(r.Text, "CONNECTED") || accepted.Load() != 0 {
		t.Errorf("connected to the host loopback: %s", r.Text)
	}
	abi, _ := sb["layers"].([]any)
	if fmt.Sprint(abi) != "" && strings.Contains(fmt.Sprint(abi), "landlock-scope-signal") {
		time.Sleep(100 * time.Millisecond)
		if syscall.Kill(host.Process.Pid, 0) != nil || e2etest.IsZombie(host.Process.Pid) {
			t.Errorf("signalled a host process (ABI >= 6 scopes signals): %s", r.Text)
		}
	}
	// backend auto without bwrap (and without a docker engine) falls
	// back to landlock.
	if _, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").Output(); err != nil {
		auto := newSandbox(t, map[string]any{"backend": "auto", "bwrap": map[string]any{"path": "/nonexistent/bwrap936"}})
		a := auto.c.Exec(map[string]any{"command": "echo ok"})
		asb, _ := a.D["sandbox"].(map[string]any)
		if a.Text != "ok" || asb["backend"] != "landlock" {
			t.Fatalf("auto fallback: %s %v", a.Text, a.D)
		}
	}
	// PTY and kill of a daemonised child work under landlock too.
	if p := se.c.Exec(map[string]any{"command": "test -t 0 && stty size", "pty": true}); !strings.Contains(p.Text, "30 120") {
		t.Errorf("pty under landlock: %s", p.Text)
	}
	b := se.c.Exec(map[string]any{"command": "(setsid sh -c 'sleep 937.1' &); sleep 937.2", "background": true})
	id := b.Str("sessionId")
	e2etest.Eventually(t, 10*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 937.1")) == 0 {
			return "not started"
		}
		return ""
	})
	se.c.Process(map[string]any{"action": "kill", "sessionId": id})
	se.c.WaitEnd(id, 10*time.Second)
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep("^sleep 937"); len(p) != 0 {
			return fmt.Sprintf("left: %v", p)
		}
		return ""
	})
}

// TestSandboxStatusCommandsAndAPI: `conch sandbox`, `conch doctor` and
// /v1/sandbox report backend and layers; docker actions say why they
// cannot run where no engine answers.
func TestSandboxStatusCommandsAndAPI(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	ws := t.TempDir()
	home := e2etest.NewHome(t, `{"sandbox":{"mode":"non-main","limits":{"memoryBytes":104857600}},"agents":{"build":{"workspace":"`+ws+`"},"lock":{"sandbox":{"backend":"landlock","network":"open"}}}}`)
	out, err := exec.Command(e2etest.ConchBin, "sandbox", "status", "--home", home).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "main: sandboxing off") || !strings.Contains(string(out), "build: backend bwrap") || !strings.Contains(string(out), "netns") {
		t.Fatalf("sandbox status: %v\n%s", err, out)
	}
	if abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1); errno == 0 && abi > 0 {
		if !strings.Contains(string(out), "lock: backend landlock") || !strings.Contains(string(out), "seccomp") {
			t.Fatalf("landlock agent: %s", out)
		}
	}
	doc, _ := exec.Command(e2etest.ConchBin, "doctor", "--home", home).CombinedOutput()
	if !strings.Contains(string(doc), "sandbox.layers: agent build: sandbox backend bwrap") || !strings.Contains(string(doc), "containment.limits") {
		t.Fatalf("doctor: %s", doc)
	}
	g := e2etest.StartGateway(t, home)
	code, body := g.Do("GET", "/v1/sandbox", g.Operator, nil, nil)
	if code != 200 || fmt.Sprint(body["agents"]) == "" || body["containers"] == nil {
		t.Fatalf("GET /v1/sandbox: %d %v", code, body)
	}
	if code, _ := g.Do("GET", "/v1/sandbox", g.Token, nil, nil); code != 403 {
		t.Fatalf("GET /v1/sandbox as an agent: %d", code)
	}
	if code, body := g.Do("POST", "/v1/sandbox/recreate", g.Operator, map[string]any{}, nil); code != 400 {
		t.Fatalf("recreate without agent: %d %v", code, body)
	}
	if _, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").Output(); err == nil {
		t.Log("a docker engine answers: recreate/prune are exercised by TestSandboxDocker")
		return
	}
	code, body = g.Do("POST", "/v1/sandbox/prune", g.Operator, map[string]any{}, nil)
	if code != 503 || !strings.Contains(fmt.Sprint(body), "docker") {
		t.Fatalf("prune without docker: %d %v", code, body)
	}
	code, body = g.Do("POST", "/v1/sandbox/recreate", g.Operator, map[string]any{"all": true}, nil)
	if code != 503 {
		t.Fatalf("recreate without docker: %d %v", code, body)
	}
}

// TestSandboxDocker runs the docker backend where an engine exists.
func TestSandboxDocker(t *testing.T) {
	if _, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").Output(); err != nil {
		t.Skip("no docker engine answers here (docker version failed); the docker backend is only tested where one exists")
	}
	if _, err := exec.Command("docker", "image", "inspect", "debian:bookworm-slim").Output(); err != nil {
		t.Skip("image debian:bookworm-slim is not present locally (the test does not pull)")
	}
	se := newSandbox(t, map[string]any{"backend": "docker"})
	r := se.c.Exec(map[string]any{"command": "pwd; echo hi > f.txt; id -u"})
	if r.Str("host") != "sandbox" || !strings.Contains("\n"+r.Text+"\n", "\n/workspace\n") {
		t.Fatalf("docker run: %s %v", r.Text, r.D)
	}
	if _, err := os.Stat(filepath.Join(se.ws, "f.txt")); err != nil {
		t.Fatal(err)
	}
	b := se.c.Exec(map[string]any{"command": "sleep 938.1 & sleep 938.2", "background": true})
	id := b.Str("sessionId")
	se.c.Process(map[string]any{"action": "kill", "sessionId": id})
	se.c.WaitEnd(id, 20*time.Second)
	e2etest.Eventually(t, 10*time.Second, func() string {
		if p := e2etest.Pgrep("^sleep 938"); len(p) != 0 {
			return fmt.Sprintf("left inside the container: %v", p)
		}
		return ""
	})
	out, err := exec.Command(e2etest.ConchBin, "sandbox", "recreate", "--all", "--home", se.home).CombinedOutput()
	if err != nil {
		t.Fatalf("recreate: %v %s", err, out)
	}
}

// TestSandboxInitDockerParts exercises the parts of sandbox-init that the
// docker backend relies on, without docker: the PTY it allocates inside
// (docker exec has none) and the kill of every process of a session by
// its CONCH_SESSION_ID marker, setsid escapees included.
func TestSandboxInitDockerParts(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(e2etest.ConchBin, "sandbox-init", "--pty", "--", "/bin/sh", "-c", "test -t 0 && test -t 1 && stty size && echo TTY-OK; exit 4")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 || !strings.Contains(string(out), "30 120") || !strings.Contains(string(out), "TTY-OK") {
		t.Fatalf("sandbox-init --pty: %v %q", err, out)
	}
	id := fmt.Sprintf("zz939-%d", os.Getpid())
	run := exec.Command("/bin/sh", "-c", "sleep 939.1 & setsid sleep 939.2 & wait")
	run.Env = append(os.Environ(), "CONCH_SESSION_ID="+id)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "939.3")
	other.Env = append(os.Environ(), "CONCH_SESSION_ID="+id+"x")
	other.Start()
	defer func() { other.Process.Kill(); other.Wait() }()
	e2etest.Eventually(t, 5*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 939.[12]")) != 2 {
			return "not started"
		}
		return ""
	})
	out, err = exec.Command(e2etest.ConchBin, "sandbox-init", "--kill-session", id, "--grace-ms", "200").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "killed 3") {
		t.Fatalf("kill-session: %v %s", err, out)
	}
	run.Wait()
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep("^sleep 939.[12]"); len(p) != 0 {
			return fmt.Sprintf("left: %v", p)
		}
		return ""
	})
	if len(e2etest.Pgrep("^sleep 939.3")) != 1 {
		t.Fatal("a process of another session was killed")
	}
}

// TestSandboxWaitProbes: wait until=port|http|file look inside the
// sandbox (its own loopback and /tmp), not at the host.
func TestSandboxWaitProbes(t *testing.T) {
	needBwrap(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 is needed for a server inside the sandbox")
	}
	t.Parallel()
	se := newSandbox(t, nil)
	// A port that is free on the host: only the sandbox's server holds it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := se.c.Exec(map[string]any{"command": fmt.Sprintf("sleep 0.3; touch /tmp/ready940; exec /usr/bin/python3 -m http.server --bind 127.0.0.1 %d", port), "background": true})
	id := r.Str("sessionId")
	w := se.c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "file", "path": "/tmp/ready940", "timeout": 10000})
	if w.Str("outcome") != "met" || w.Str("fired") != "file" {
		t.Fatalf("wait file inside: %s %v", w.Text, w.D)
	}
	if _, err := os.Stat("/tmp/ready940"); err == nil {
		t.Fatal("the file probe target exists on the host /tmp")
	}
	w = se.c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "port", "port": port, "timeout": 10000})
	if w.Str("outcome") != "met" || w.Str("fired") != "port" {
		t.Fatalf("wait port inside: %s %v", w.Text, w.D)
	}
	w = se.c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "http", "url": fmt.Sprintf("http://127.0.0.1:%d/", port), "timeout": 10000})
	if w.Str("outcome") != "met" || w.Str("fired") != "http" {
		t.Fatalf("wait http inside: %s %v", w.Text, w.D)
	}
	// The host does not see the sandbox server.
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		c.Close()
		t.Fatal("the sandbox's server is reachable from the host")
	}
	se.c.Process(map[string]any{"action": "kill", "sessionId": id})
	se.c.WaitEnd(id, 10*time.Second)
}

// TestSandboxApplyPatch: apply_patch for a sandboxed agent writes the
// host side of the sandbox's workspace, takes paths as the sandbox sees
// them (/workspace/…), keeps protectPaths read-only, and refuses a
// read-only workspace.
func TestSandboxApplyPatch(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, map[string]any{"workspacePath": "/workspace"})
	// newSandbox's config has no applyPatch: start another conch with it.
	se.c.Close()
	conf, _ := os.ReadFile(filepath.Join(se.home, "config.json"))
	var m map[string]any
	json.Unmarshal(conf, &m)
	m["tools"] = map[string]any{"exec": map[string]any{"applyPatch": map[string]any{"enabled": true}}}
	b, _ := json.Marshal(m)
	os.WriteFile(filepath.Join(se.home, "config.json"), b, 0o600)
	os.MkdirAll(filepath.Join(se.ws, ".git", "hooks"), 0o755)
	c := e2etest.StartConchEnv(t, se.home, []string{"HOME=" + se.userHome})
	r := c.Call("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: /workspace/sub/new940.txt\n+from-patch\n*** End Patch"})
	if r.IsError {
		t.Fatalf("apply in sandbox: %s %v", r.Text, r.D)
	}
	if b, err := os.ReadFile(filepath.Join(se.ws, "sub", "new940.txt")); err != nil || string(b) != "from-patch\n" {
		t.Fatalf("host side: %q %v", b, err)
	}
	if x := c.Exec(map[string]any{"command": "cat /workspace/sub/new940.txt"}); x.Text != "from-patch" || x.Str("host") != "sandbox" {
		t.Fatalf("seen inside: %s %v", x.Text, x.D)
	}
	r = c.Call("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: .git/hooks/pre-commit\n+evil\n*** End Patch"})
	if !r.IsError || !strings.Contains(r.Text, "protected") {
		t.Fatalf("protected path: %s %v", r.Text, r.D)
	}
	if _, err := os.Stat(filepath.Join(se.ws, ".git", "hooks", "pre-commit")); err == nil {
		t.Fatal("a protected path was written")
	}
}

// hostListener listens on a loopback port of the host until the test ends
// and counts the connections it accepts; a sandboxed command must not reach
// it.
func hostListener(t *testing.T) (port int, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}
