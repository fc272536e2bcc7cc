package cli

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/conchsh/conch/client"
)

func TestShellJoin(t *testing.T) {
	// A first word that is a keyword or an assignment is quoted too.
	got := shellJoin([]string{"printf", "%s\n", "a b", "it's", "", "x=1", "~/f", "$HOME", "if", "a'\tb"})
	want := `printf '%s` + "\n" + `' 'a b' "it's" '' 'x=1' '~/f' '$HOME' 'if' 'a'\''` + "\t" + `b'`
	if got != want {
		t.Fatalf("shellJoin = %q, want %q", got, want)
	}
}

func endOf(state string, code *int, sig, by *string) client.End {
	return client.End{State: state, ExitCode: code, Signal: sig, KilledBy: by}
}

func TestExecExitCode(t *testing.T) {
	i := func(n int) *int { return &n }
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		e    sessionEnd
		want int
	}{
		{sessionEnd{End: endOf("exited", i(0), nil, nil)}, 0},
		{sessionEnd{End: endOf("exited", i(42), nil, nil)}, 42},
		{sessionEnd{End: endOf("signaled", nil, s("SIGKILL"), nil)}, 137},
		{sessionEnd{End: endOf("killed", nil, s("SIGTERM"), s("agent"))}, 143},
		{sessionEnd{End: endOf("killed", i(0), nil, s("operator"))}, 0},
		{sessionEnd{End: endOf("killed", nil, s("SIGTERM"), s("timeout"))}, 124},
		{sessionEnd{End: endOf("denied", nil, nil, nil)}, 77},
		{sessionEnd{End: endOf("lost", nil, nil, nil)}, 125},
		{sessionEnd{End: endOf("", i(1), nil, nil)}, 1},
		{sessionEnd{End: endOf("", nil, nil, nil)}, 125},
	} {
		if got := execExitCode(c.e); got != c.want {
			t.Errorf("%+v: %d, want %d", c.e, got, c.want)
		}
	}
}

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

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
