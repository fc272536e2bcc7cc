//go:build linux

package sandbox

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/creack/pty"
)

// TestSandboxProtectPathSymlinkEscape: a sandboxed command replaces a
// protected path (.conch, .git/hooks) with a symlink to a host directory;
// the next run must not get that directory bound into the sandbox.
func TestSandboxProtectPathSymlinkEscape(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, nil)
	// A relative link resolves on the host and inside bwrap's new root
	// alike: ws/../../.. is / on the host (so the host /tmp with its sockets shows) and /newroot inside.
	up := strings.Repeat("../", strings.Count(se.ws, "/"))
	os.WriteFile("/tmp/revsec990", []byte("HOST-TMP-990\n"), 0o600)
	defer os.Remove("/tmp/revsec990")
	r := se.c.Exec(map[string]any{"command": fmt.Sprintf("rm -rf .conch .git; mkdir -p .git; ln -s %stmp .conch; ls -la . .git",
		up)})
	t.Log(r.Text)
	r = se.c.Exec(map[string]any{"command": "cat .conch/revsec990; ls .conch/; echo end; ls " + filepath.Join(se.userHome, ".ssh")})
	t.Log(r.Text)
	// The run fails closed; it neither shows the host /tmp nor runs on
	// the gateway.
	if code, _ := r.D["error"].(map[string]any); code["code"] != "sandbox_unavailable" || !strings.Contains(r.Text, "symbolic link") {
		t.Errorf("want sandbox_unavailable naming the link: %s %v", r.Text, r.D)
	}
	if strings.Contains(r.Text, "CONCH-HOME-SECRET") || strings.Contains(r.Text, "SECRET-KEY-930") || strings.Contains(r.Text, "HOST-TMP-990") {
		t.Fatalf("a protectPaths symlink bound a host directory into the sandbox:\n%s", r.Text)
	}
}

// TestSandboxLandlockHostProc: under the landlock backend host processes
// are visible in /proc, but the gateway's environment, memory and
// file descriptors must not be readable.
func TestSandboxLandlockHostProc(t *testing.T) {
	needLandlock(t)
	t.Parallel()
	se := newSandbox(t, map[string]any{"backend": "landlock"})
	pid := se.c.Cmd.Process.Pid
	r := se.c.Exec(map[string]any{"command": "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status"})
	t.Log(r.Text)
	for _, l := range strings.Split(r.Text, "\n") {
		if f := strings.Fields(l); len(f) == 2 && strings.Trim(f[1], "0") != "" {
			t.Errorf("the landlock sandbox keeps capabilities: %s", l)
		}
	}
	r = se.c.Exec(map[string]any{"command": fmt.Sprintf("tr '\\0' '\\n' < /proc/%d/environ | grep LEAK930; ls -l /proc/%d/fd/ | head; ls /proc/%d/cwd/ | head; head -c 64 /proc/%d/mem | od | head -2; echo end", pid, pid, pid, pid)})
	t.Log(r.Text)
	if strings.Contains(r.Text, "gateway-env") || strings.Contains(r.Text, "socket:") {
		t.Fatalf("the gateway's /proc entries are readable from the landlock sandbox:\n%s", r.Text)
	}
}

// TestSandboxLandlockUnixSockets: Landlock below ABI 9 does not cover
// connect(2) to pathname UNIX sockets, so a landlocked command must not
// reach the engine socket (operator rights) or any other host socket.
func TestSandboxLandlockUnixSockets(t *testing.T) {
	needLandlock(t)
	t.Parallel()
	se := newSandbox(t, map[string]any{"backend": "landlock"})
	sock := filepath.Join(se.home, "run", "engine.sock")
	e2etest.Eventually(t, 5*time.Second, func() string {
		if _, err := os.Stat(sock); err != nil {
			return err.Error()
		}
		return ""
	})
	r := se.c.Exec(map[string]any{"command": "curl -s -m 5 --unix-socket " + sock + " http://conch/v1/ledger?limit=1 -o /dev/null -w 'HTTP%{http_code}\\n'; echo end"})
	t.Log(r.Text)
	if r.Str("host") != "sandbox" {
		t.Fatalf("not sandboxed: %s %v", r.Text, r.D)
	}
	if strings.Contains(r.Text, "HTTP200") {
		t.Fatalf("the landlock sandbox reached the engine socket with operator rights:\n%s", r.Text)
	}
	// network none: no AF_VSOCK socket either (a VM guest's line to its
	// host).
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		v := se.c.Exec(map[string]any{"command": "/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print(\"VSOCK-OK\")' 2>&1"})
		if strings.Contains(v.Text, "VSOCK-OK") {
			t.Errorf("an AF_VSOCK socket was created in the landlock sandbox with network none: %s", v.Text)
		}
	}
	// A socket pair (no path) still works inside.
	if p := se.c.Exec(map[string]any{"command": "/usr/bin/python3 -c 'import socket; a,b=socket.socketpair(); a.send(b\"ok\"); print(b.recv(2).decode())' 2>&1 || echo no-python"}); !strings.Contains(p.Text, "ok") && !strings.Contains(p.Text, "no-python") {
		t.Errorf("socketpair inside the landlock sandbox: %s", p.Text)
	}
}

// TestSandboxProtectPathsParentRename: renaming the directory above a
// protected path (.git) must not let the command put its own hooks in
// place for the host's git.
func TestSandboxProtectPathsParentRename(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	// gitAccess "rw": the default makes all of .git read-only.
	se := newSandbox(t, map[string]any{"gitAccess": "rw"})
	hook := filepath.Join(se.ws, ".git", "hooks", "pre-commit")
	os.MkdirAll(filepath.Dir(hook), 0o755)
	os.WriteFile(hook, []byte("orig\n"), 0o755)
	os.WriteFile(filepath.Join(se.ws, ".git", "config"), []byte("[core]\n"), 0o644)
	r := se.c.Exec(map[string]any{"command": "mv .git .git-old; rm -rf .git; mv .git/hooks .git/h2; mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit; echo obj > .git/objfile && echo git-dir-writable"})
	t.Log(r.Text)
	if r.Str("host") != "sandbox" {
		t.Fatalf("not sandboxed: %s %v", r.Text, r.D)
	}
	if b, _ := os.ReadFile(hook); string(b) != "orig\n" {
		t.Fatalf("the host's git hook was replaced from the sandbox: %q\n%s", b, r.Text)
	}
	if !strings.Contains(r.Text, "git-dir-writable") {
		t.Errorf("the rest of .git must stay writable: %s", r.Text)
	}
}

// TestSandboxLandlockOtherTerminals: a landlocked command may use its
// own terminal but not open another one of the same user (another
// session's PTY: reading it steals that session's input, writing it
// forges its output).
func TestSandboxLandlockOtherTerminals(t *testing.T) {
	needLandlock(t)
	t.Parallel()
	se := newSandbox(t, map[string]any{"backend": "landlock"})
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	r := se.c.Exec(map[string]any{"command": "echo FORGED992 > " + tty.Name() + " && echo WROTE; test -t 0 && stty size", "pty": true})
	t.Log(r.Text)
	if strings.Contains(r.Text, "WROTE") {
		t.Errorf("the landlock sandbox wrote to another terminal (%s): %s", tty.Name(), r.Text)
	}
	if !strings.Contains(r.Text, "30 120") {
		t.Errorf("the command's own terminal must work: %s", r.Text)
	}
}

// TestNodeHelloBounds: a holder of a reusable join token cannot grow the
// pairing state without bound (fresh keys, huge names) nor put terminal
// control sequences into the names operators list.
func TestNodeHelloBounds(t *testing.T) {
	t.Parallel()
	g := e2etest.StartNodeGateway(t, e2etest.NewHome(t, e2etest.NodeGatewayConfig), "127.0.0.1:0")
	tok := g.Invite("1h", false)
	hello := func(name string) websocket.StatusCode {
		t.Helper()
		pub, key, _ := ed25519.GenerateKey(rand.Reader)
		return e2etest.HandHello(t, g, tok, pub, key, name, nil)
	}
	if code := hello(strings.Repeat("n", 1<<20)); code != 4401 {
		t.Errorf("a 1 MiB node name: close %d, want 4401", code)
	}
	if code := hello("esc\x1b]0;pwned\x07name"); code != 0 {
		t.Fatalf("hello with control characters: close %d", code)
	}
	_, m := g.Do("GET", "/v1/nodes", g.Operator, nil, nil)
	out := fmt.Sprint(m)
	if strings.Contains(out, "\x1b") || strings.Contains(out, "\x07") || !strings.Contains(out, "esc-0-pwnedname") {
		t.Errorf("control characters in a node name reach the operator (%d bytes of /v1/nodes)", len(out))
	}
	refused := 0
	for i := 0; i < 80; i++ {
		if hello(fmt.Sprintf("flood%d", i)) != 0 {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("80 more pairing requests from one join token were all kept")
	}
}

// TestInheritedFdsStayOut: a file descriptor conch itself inherited
// without close-on-exec (from an MCP client, a shell) must not reach the
// commands it runs, on the gateway or in a sandbox.
func TestInheritedFdsStayOut(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var st syscall.Stat_t
	syscall.Fstat(int(w.Fd()), &st)
	mark := fmt.Sprintf("pipe:[%d]", st.Ino)
	confs := []string{`{}`}
	if _, err := exec.LookPath("bwrap"); err == nil {
		confs = append(confs, "sandbox")
	}
	for _, conf := range confs {
		ws := t.TempDir()
		if conf == "sandbox" {
			conf = fmt.Sprintf(`{"sandbox":{"mode":"all","backend":"bwrap"},"agents":{"main":{"workspace":%q}}}`, ws)
		}
		home := e2etest.NewHome(t, conf)
		cmd := exec.Command(e2etest.ConchBin, "exec", "--home", home, "--", "for f in /proc/self/fd/*; do readlink $f; done; echo end")
		cmd.Dir = ws
		// Above 3 and 4, which the supervisor's own pipes replace.
		null, _ := os.Open(os.DevNull)
		defer null.Close()
		cmd.ExtraFiles = []*os.File{null, null, null, null, null, null, r, w}
		out, err := cmd.CombinedOutput()

		if err != nil || !strings.Contains(string(out), "end") {
			t.Fatalf("conch exec: %v %s", err, out)
		}
		if strings.Contains(string(out), mark) {
			t.Errorf("an fd inherited by conch reached the command (%s): %s", conf, out)
		}
	}
}

// TestSandboxWaitFileStaysInside: until=file resolves the path inside the
// sandbox's root; an absolute symlink made inside must not turn the
// probe into an existence test of host files.
func TestSandboxWaitFileStaysInside(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	se := newSandbox(t, nil)
	secret := filepath.Join(se.home, "secret.txt")
	r := se.c.Exec(map[string]any{"command": "ln -s " + secret + " probe993; ln -s /tmp/in993 inside993; touch /tmp/in993; sleep 993.1", "background": true})
	id := r.Str("sessionId")
	defer func() {
		se.c.Process(map[string]any{"action": "kill", "sessionId": id})
		se.c.WaitEnd(id, 10*time.Second)
	}()
	w := se.c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "file", "path": "inside993", "timeout": 10000})
	if w.Str("outcome") != "met" {
		t.Fatalf("a link to a file inside the sandbox: %s %v", w.Text, w.D)
	}
	w = se.c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "file", "path": "probe993", "timeout": 500})
	if w.Str("outcome") == "met" {
		t.Fatalf("until=file followed a link to the host's %s: %s", secret, w.Text)
	}
}

// TestSandboxNoVsock: with network none, bwrap's network namespace does
// not cover AF_VSOCK (a VM guest's line to its hypervisor); the init
// inside refuses such sockets.
func TestSandboxNoVsock(t *testing.T) {
	needBwrap(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 is needed to create a socket")
	}
	t.Parallel()
	se := newSandbox(t, nil)
	for _, pty := range []bool{false, true} {
		r := se.c.Exec(map[string]any{"pty": pty, "command": "/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print(\"VSOCK-OK\")' 2>&1; /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM); print(\"INET-OK\")'"})
		if r.Str("host") != "sandbox" || !strings.Contains(r.Text, "INET-OK") {
			t.Fatalf("pty=%v: %s %v", pty, r.Text, r.D)
		}
		if strings.Contains(r.Text, "VSOCK-OK") {
			t.Errorf("pty=%v: an AF_VSOCK socket was created in the bwrap sandbox with network none: %s", pty, r.Text)
		}
	}
}
