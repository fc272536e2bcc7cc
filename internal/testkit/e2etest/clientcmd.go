package e2etest

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

// CLIEnv is the environment of the CLI under test: the test's own minus
// conch's variables, so that a developer's CONCH_GATEWAY or CONCH_TOKEN
// cannot leak in.
func CLIEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONCH_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// RunCLI runs the conch binary with a hard deadline and returns its
// stdout, stderr and exit code.
func RunCLI(t testing.TB, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Slow(60*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, ConchBin, args...)
	// A stray home never lands in the developer's ~/.conch.
	cmd.Env = CLIEnv(append([]string{"CONCH_HOME=" + filepath.Join(t.TempDir(), "default-home")}, env...)...)
	cmd.Dir = t.TempDir()
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
