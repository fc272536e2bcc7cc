package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCLIIn is runCLI with the CLI started in dir and stdin from in.
func runCLIIn(t *testing.T, dir, in string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, conchBin, args...)
	cmd.Env = cliEnv("CONCH_HOME=" + filepath.Join(t.TempDir(), "default-home"))
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
	served := newHome(t, cfg)
	// The engine's own directory is not the user's: conch serve runs in
	// the test's working directory, the CLI in fresh temporary ones.
	g := startGateway(t, served)
	engineDir, _ := os.Getwd()
	for _, b := range []struct {
		name string
		home string
		args []string
	}{
		{"in-process", newHome(t, cfg), nil},
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
		out, errOut, code := runCLIIn(t, dir, "", "exec", "--home", served, "--gateway", g.base, "--token", g.token, "--", "pwd")
		if code != 0 || strings.TrimSpace(out) == dir {
			t.Fatalf("exec pwd via --gateway: exit %d, %q %q", code, out, errOut)
		}
		if real, _ := filepath.EvalSymlinks(engineDir); strings.TrimSpace(out) != real && strings.TrimSpace(out) != engineDir {
			t.Fatalf("exec pwd via --gateway = %q, want the gateway's directory %s", out, engineDir)
		}
	})
}
