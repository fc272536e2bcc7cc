//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestSandboxLandlockUnprivileged: a conch that is not root sandboxes its
// commands with the landlock backend too. Every such command used to fail
// with `conch sandbox-init: drop capabilities: operation not permitted`
// (shrinking the bounding set takes CAP_SETPCAP). The command runs as
// that user, with no capability, no_new_privs and the seccomp filter, and
// writes only in its workspace.
func TestSandboxLandlockUnprivileged(t *testing.T) {
	needLandlock(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run conch as another user")
	}
	t.Parallel()
	const uid = 65534
	// conch and conch-shim where that user may run them (the build cache
	// may be below root's home).
	bin, err := os.MkdirTemp("", "conch-unpriv-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	os.Chmod(bin, 0o755)
	for _, src := range []string{e2etest.ConchBin, e2etest.ShimBin} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, filepath.Base(src)), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The home, the workspace and a directory outside it, the user's.
	root, err := os.MkdirTemp("", "conch-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	home, ws, outside := filepath.Join(root, "home"), filepath.Join(root, "ws"), filepath.Join(root, "outside")
	for _, d := range []string{home, ws, outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"sandbox":{"mode":"all","backend":"landlock"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, ws, outside, filepath.Join(home, "config.json")} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	script := `id -u; grep -E '^(CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
echo in > ` + ws + `/f && echo ws-ok
echo out > ` + outside + `/f 2>/dev/null && echo outside-written
true`
	cmd := exec.Command(filepath.Join(bin, "conch"), "exec", "--", "sh", "-c", script)
	cmd.Dir = ws
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "CONCH_HOME=" + home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conch exec as uid %d under landlock: %v\n%s", uid, err, out)
	}
	text := string(out)
	for _, want := range []string{"65534\n", "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "ws-ok"} {
		if !strings.Contains(text, want) {
			t.Errorf("want %q in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "outside-written") {
		t.Errorf("the command wrote outside its workspace:\n%s", text)
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Error("a file outside the workspace was created")
	}
}
