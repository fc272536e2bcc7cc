//go:build linux

package initproc

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/host/sandbox/landlock"
)

// The test binary is sandbox-init when its first argument says so, as
// conch-shim is: every test below runs the real init in a process of its
// own.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "sandbox-init" {
		os.Exit(InitMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// initCmd is the init run with args, its stdin /dev/null.
func initCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"sandbox-init"}, args...)...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("run the init: %v", err)
	}
	return ee.ExitCode()
}

// TestInitFailsClosed: an invocation the init cannot carry out in full
// (an option without its value, an unknown option, no command, a policy
// that does not decode, a terminal it cannot claim) ends with 125 and the
// command never runs. The members of the class are generated from the
// options that take values.
func TestInitFailsClosed(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	command := []string{"--", "/bin/sh", "-c", "touch " + marker}
	var cases [][]string
	for _, opt := range []string{"--probe", "--kill-session", "--grace-ms", "--stage", "--verify-mounts", "--allow-mount", "--beneath", "--landlock", "--block-fd"} {
		cases = append(cases, []string{opt})
	}
	cases = append(cases,
		append([]string{"--no-such-option"}, command...),
		[]string{"--"},
		[]string{},
		append([]string{"--landlock", "not base64!"}, command...),
		append([]string{"--landlock", base64.StdEncoding.EncodeToString([]byte("{"))}, command...),
		append([]string{"--landlock", base64.StdEncoding.EncodeToString([]byte(`{"ro":"not a list"}`))}, command...),
		append([]string{"--block-fd", "three"}, command...),
		append([]string{"--ctty"}, command...), // stdin is /dev/null: no terminal to claim
	)
	for _, args := range cases {
		out, err := initCmd(t, args...).CombinedOutput()
		if code := exitCode(t, err); code != 125 {
			t.Errorf("sandbox-init %q: exit %d, want 125 (%s)", args, code, out)
		}
		if !strings.HasPrefix(string(out), "conch sandbox-init: ") {
			t.Errorf("sandbox-init %q: said %q, want its reason", args, out)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("sandbox-init %q ran the command", args)
		}
	}
}

// TestInitExecsInPlace: the command replaces the init (same pid), and a
// missing command is 127 as in a shell.
func TestInitExecsInPlace(t *testing.T) {
	cmd := initCmd(t, "--", "/bin/sh", "-c", "echo $$")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != itoa(cmd.Process.Pid) {
		t.Fatalf("the command ran as pid %s, the init was %d", got, cmd.Process.Pid)
	}
	if code := exitCode(t, initCmd(t, "--", filepath.Join(t.TempDir(), "missing")).Run()); code != 127 {
		t.Fatalf("a missing command: exit %d, want 127", code)
	}
}

// TestInitWaitsOnTheBlockFD: with --block-fd the command does not start
// before the descriptor is closed (the supervisor moves the tree into its
// limit cgroups meanwhile).
func TestInitWaitsOnTheBlockFD(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := initCmd(t, "--block-fd", "3", "--", "/bin/sh", "-c", "touch "+marker)
	cmd.ExtraFiles = []*os.File{r}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	// Until w closes, the init cannot get past its read: the marker
	// cannot exist, however long this takes to look.
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran before the block fd was released")
	}
	if exe, _ := os.Readlink("/proc/" + itoa(cmd.Process.Pid) + "/exe"); strings.HasSuffix(exe, "/sh") {
		t.Fatal("the init exec'd before the block fd was released")
	}
	w.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the command did not run once released")
	}
}

// TestLandlockInitDropsEverything: under --landlock the command runs with
// no capability in any set (bounding and ambient included), no_new_privs,
// a seccomp filter, and writes only where the policy says.
func TestLandlockInitDropsEverything(t *testing.T) {
	if sandbox.LandlockABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	rw, outside := t.TempDir(), t.TempDir()
	p := landlock.Policy{RO: []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/dev"}, RW: []string{rw}}
	b, _ := json.Marshal(p)
	script := `grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status
echo in > ` + rw + `/f && echo rw-ok
echo out > ` + outside + `/f 2>/dev/null && echo outside-written
true`
	out, err := initCmd(t, "--landlock", base64.StdEncoding.EncodeToString(b), "--", "/bin/sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	text := string(out)
	for _, want := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "rw-ok"} {
		if !strings.Contains(text, want) {
			t.Errorf("under the landlock init, want %q in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "outside-written") {
		t.Errorf("the command wrote outside its policy:\n%s", text)
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Error("a file outside the policy was created")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
