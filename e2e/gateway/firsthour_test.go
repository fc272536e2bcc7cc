package gateway

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// runCLIIn is e2etest.RunCLI with the CLI started in dir and stdin from in.
func runCLIIn(t *testing.T, dir, in string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2etest.ConchBin, args...)
	cmd.Env = e2etest.CLIEnv("CONCH_HOME=" + filepath.Join(t.TempDir(), "default-home"))
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("conch %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// realDir is a new temporary directory with its symlinks resolved, the
// form `pwd` prints.
func realDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCLIRunsWhereTheUserIs: every CLI command that runs something on
// this machine (exec, apply-patch) defaults to the directory the CLI was
// started in, through each way of reaching an engine on this machine (an
// in-process engine, the engine socket of a running `conch serve`); -C is
// relative to it. Through --gateway the user's directory is not sent.
func TestCLIRunsWhereTheUserIs(t *testing.T) {
	for _, k := range []string{"CONCH_GATEWAY", "CONCH_TOKEN", "CONCH_AGENT"} {
		t.Setenv(k, "")
	}
	const cfg = `{"tools":{"exec":{"applyPatch":{"enabled":true}}}}`
	served := e2etest.NewHome(t, cfg)
	// The engine's own directory is not the user's: conch serve runs in
	// the test's working directory, the CLI in fresh temporary ones.
	g := e2etest.StartGateway(t, served)
	engineDir, _ := os.Getwd()
	for _, b := range []struct {
		name string
		home string
		args []string
	}{
		{"in-process", e2etest.NewHome(t, cfg), nil},
		{"socket", served, nil},
	} {
		t.Run(b.name, func(t *testing.T) {
			dir := realDir(t)
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			base := append([]string{"--home", b.home}, b.args...)
			out, errOut, code := runCLIIn(t, dir, "", append(append([]string{"exec"}, base...), "--", "pwd")...)
			if code != 0 || strings.TrimSpace(out) != dir {
				t.Fatalf("exec pwd in %s: exit %d, %q %q", dir, code, out, errOut)
			}
			out, errOut, code = runCLIIn(t, dir, "", append(append([]string{"exec", "-C", "sub"}, base...), "--", "pwd")...)
			if code != 0 || strings.TrimSpace(out) != filepath.Join(dir, "sub") {
				t.Fatalf("exec -C sub pwd in %s: exit %d, %q %q", dir, code, out, errOut)
			}
			patch := "*** Begin Patch\n*** Add File: made.txt\n+here\n*** End Patch\n"
			out, errOut, code = runCLIIn(t, dir, patch, append([]string{"apply-patch"}, base...)...)
			if code != 0 {
				t.Fatalf("apply-patch in %s: exit %d, %q %q", dir, code, out, errOut)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "made.txt")); err != nil || string(b) != "here\n" {
				t.Fatalf("apply-patch did not write made.txt in %s: %q %v (%q)", dir, b, err, out)
			}
		})
	}
	t.Run("gateway", func(t *testing.T) {
		// A remote gateway gets no local path: it runs the command in its
		// own default directory.
		dir := realDir(t)
		out, errOut, code := runCLIIn(t, dir, "", "exec", "--home", served, "--gateway", g.Base, "--token", g.Token, "--", "pwd")
		if code != 0 || strings.TrimSpace(out) == dir {
			t.Fatalf("exec pwd via --gateway: exit %d, %q %q", code, out, errOut)
		}
		if real, _ := filepath.EvalSymlinks(engineDir); strings.TrimSpace(out) != real && strings.TrimSpace(out) != engineDir {
			t.Fatalf("exec pwd via --gateway = %q, want the gateway's directory %s", out, engineDir)
		}
	})
}

// TestServeExitsWithParent: `conch serve` started by a parent that is then
// killed with SIGTERM (as `go run` is: it does not pass the signal on)
// stops when --exit-with-parent is on, by default when the parent is the
// go command, and frees its home and port for the next start. The parent
// is a copy of /bin/sh named "go" or "launcher", so that the automatic
// default is tested on a real process whose executable is called go.
func TestServeExitsWithParent(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	shBytes, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, name := range []string{"go", "launcher"} {
		if err := os.WriteFile(filepath.Join(bin, name), shBytes, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		parent string
		flags  []string
		stops  bool
	}{
		{"go", nil, true},
		{"launcher", []string{"--exit-with-parent"}, true},
		{"go", []string{"--exit-with-parent=false"}, false},
		{"launcher", nil, false},
	} {
		t.Run(c.parent+strings.Join(c.flags, ""), func(t *testing.T) {
			home := e2etest.NewHome(t, "")
			outPath := filepath.Join(t.TempDir(), "out")
			out, err := os.Create(outPath)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			args := append([]string{"serve", "--home", home, "--listen", "127.0.0.1:0", "--log-level", "info"}, c.flags...)
			// The parent starts serve and waits for it, as go run does;
			// SIGTERM ends the parent alone.
			parent := exec.Command(filepath.Join(bin, c.parent), append([]string{"-c", `"$@" & echo "child $!"; wait`, "sh", e2etest.ConchBin}, args...)...)
			parent.Env = e2etest.CLIEnv()
			parent.Stdout, parent.Stderr = out, out
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			var pid int
			var addr string
			e2etest.Eventually(t, 60*time.Second, func() string {
				b, _ := os.ReadFile(outPath)
				if m := e2etest.ListenRE.FindStringSubmatch(string(b)); m != nil {
					addr = strings.TrimPrefix(m[1], "http://")
				}
				for _, l := range strings.Split(string(b), "\n") {
					if n, ok := strings.CutPrefix(l, "child "); ok {
						pid, _ = strconv.Atoi(n)
					}
				}
				if pid == 0 || addr == "" {
					return "serve did not start:\n" + string(b)
				}
				return ""
			})
			t.Cleanup(func() {
				syscall.Kill(pid, syscall.SIGTERM)
				e2etest.Eventually(t, 60*time.Second, func() string {
					if !e2etest.IsZombie(pid) {
						return "serve did not stop on SIGTERM"
					}
					return ""
				})
			})
			if err := parent.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			parent.Wait()
			if !c.stops {
				// The parent is gone and reaped; a parent-death signal
				// would have been sent before that. serve still answers.
				conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					t.Fatalf("serve stopped with its parent: %v", err)
				}
				conn.Close()
				if e2etest.IsZombie(pid) {
					t.Fatal("serve stopped with its parent")
				}
				return
			}
			e2etest.Eventually(t, 60*time.Second, func() string {
				if !e2etest.IsZombie(pid) {
					b, _ := os.ReadFile(outPath)
					return "serve outlived its parent:\n" + string(b)
				}
				return ""
			})
			// It stopped as on SIGTERM, and the next start gets the home.
			e2etest.StartGateway(t, home)
		})
	}
}
