package e2etest

import (
	"testing"
)

// RunCLIHome runs conch with args and --home home; it returns the
// combined output and the exit code.
func RunCLIHome(t testing.TB, home string, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := RunCLI(t, nil, append(args, "--home", home)...)
	return out + errOut, code
}
