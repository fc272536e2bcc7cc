//go:build unix

package cli

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestEngineSocketRefusesOtherUID: the engine socket checks the peer's
// uid (SO_PEERCRED), not only the file mode. The test loosens the
// socket's mode to 0777 so that only the uid check can refuse user
// nobody's curl.
func TestEngineSocketRefusesOtherUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client as another uid")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	dir, err := os.MkdirTemp("/tmp", "conch-peercred-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "engine.sock")
	ln, err := listenEngineSocket(path, slogDiscard())
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "operator-ok") })}
	go hs.Serve(ln)
	defer hs.Close()
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	run := func(uid uint32) (string, error) {
		cmd := exec.Command(curl, "-sS", "--max-time", "20", "--unix-socket", path, "http://engine/v1/health")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(0); err != nil || out != "operator-ok" {
		t.Fatalf("same uid: %q %v", out, err)
	}
	out, err := run(65534)
	if err == nil || strings.Contains(out, "operator-ok") {
		t.Fatalf("uid 65534 was served: %q %v", out, err)
	}
}
