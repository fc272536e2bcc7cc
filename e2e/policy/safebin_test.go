package policy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// gatedDefaults is a home with the reproduction setup: host
// gateway, security allowlist, ask off, an allowlist of echo only and the
// given extra exec settings (the default safe bins when empty).
func gatedDefaults(t *testing.T, extra string) string {
	t.Helper()
	echo := echoPath(t)
	return e2etest.GatedHome(t, `,"security":"allowlist","ask":"off"`+extra,
		`{"version":1,"agents":{"main":{"allowlist":[{"pattern":"`+echo+`"}]}}}`)
}

// runGated runs `conch exec -C dir -- command` in process and returns its
// stdout, stderr and exit code.
func runGated(t *testing.T, home, dir, command string) (string, string, int) {
	t.Helper()
	return e2etest.RunCLI(t, nil, "exec", "--home", home, "-C", dir, "--", command)
}

func mustDeny(t *testing.T, home, dir, command string) string {
	t.Helper()
	out, errOut, code := runGated(t, home, dir, command)
	if code != e2etest.ExitDenied || !strings.Contains(out+errOut, "exec denied") {
		t.Fatalf("%q was not denied: exit %d\nstdout: %s\nstderr: %s", command, code, out, errOut)
	}
	return out + errOut
}

// TestGateSafeBinFileAccess: the reported bypasses of the default safe bins
// through the real binary. uniq --group takes its argument only with "=",
// so "-" and ".bash_profile" were uniq's INPUT and OUTPUT: a file write; the
// same reads a file. Each is denied and touches nothing; the harmless forms
// still run.
func TestGateSafeBinFileAccess(t *testing.T) {
	home := gatedDefaults(t, "")
	wd := t.TempDir()
	mustDeny(t, home, wd, "echo 'touch /tmp/PWNED' | uniq --group - --group .bash_profile")
	if _, err := os.Stat(filepath.Join(wd, ".bash_profile")); !os.IsNotExist(err) {
		t.Fatalf(".bash_profile was written: %v", err)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "shadow"), []byte("SECRET-LINE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustDeny(t, home, root, "uniq --group etc/shadow"); strings.Contains(out, "SECRET") {
		t.Fatalf("the file was read: %s", out)
	}
	for _, cmd := range []string{"uniq - etc/shadow", "uniq '' out", "head -- etc/shadow", "uniq --gr etc/shadow"} {
		if out := mustDeny(t, home, root, cmd); strings.Contains(out, "SECRET") {
			t.Fatalf("%q read the file: %s", cmd, out)
		}
	}
	out, errOut, code := runGated(t, home, root, "echo b | uniq --group=append")
	if code != 0 || strings.TrimSpace(out) != "b" {
		t.Fatalf("uniq --group=append: exit %d %q %s", code, out, errOut)
	}
}

// TestGateJQEmptyFilter: with jq a safe bin, `jq ” FILE` read FILE (the
// empty word was skipped, so FILE counted as the filter).
func TestGateJQEmptyFilter(t *testing.T) {
	if _, err := os.Stat("/usr/bin/jq"); err != nil {
		t.Skip("jq is not installed in /usr/bin")
	}
	home := gatedDefaults(t, `,"safeBins":["jq"]`)
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "secret.json"), []byte(`{"secret":"SECRET-VALUE"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"jq '' secret.json", "jq . secret.json", "jq . - secret.json"} {
		if out := mustDeny(t, home, wd, cmd); strings.Contains(out, "SECRET") {
			t.Fatalf("%q read the file: %s", cmd, out)
		}
	}
	out, errOut, code := runGated(t, home, wd, `echo '{"a":1}' | jq -c .a`)
	if code != 0 || strings.TrimSpace(out) != "1" {
		t.Fatalf("jq -c .a: exit %d %q %s", code, out, errOut)
	}
}

// TestGateLoginShell: bash -lc runs ~/.bash_profile, code the gate never
// judged, so it is not satisfied by the analysis of its script.
func TestGateLoginShell(t *testing.T) {
	home := gatedDefaults(t, "")
	wd := t.TempDir()
	for _, cmd := range []string{"bash -lc 'echo hi'", "bash -l -c 'echo hi'", "bash --login -c 'echo hi'", "sh -cl 'echo hi'"} {
		mustDeny(t, home, wd, cmd)
	}
	out, errOut, code := runGated(t, home, wd, "bash -c 'echo hi'")
	if code != 0 || strings.TrimSpace(out) != "hi" {
		t.Fatalf("bash -c: exit %d %q %s", code, out, errOut)
	}
}

// TestGateSegmentCap: a command of more than 256 segments is not
// satisfied, with the reason, however cheap each segment is; 2,000
// segments are refused (the policy reaches its verdict without resolving
// them).
func TestGateSegmentCap(t *testing.T) {
	home := gatedDefaults(t, "")
	wd := t.TempDir()
	mustDeny(t, home, wd, "echo hi"+strings.Repeat(" | head", 256))
	mustDeny(t, home, wd, "echo hi"+strings.Repeat(" | cat", 2000))
	mustDeny(t, home, wd, "echo hi | bash -c 'echo hi"+strings.Repeat(" | head", 255)+"'")
	out, code := e2etest.CLI(t, "policy", "explain", "--home", home, "--", "echo hi"+strings.Repeat(" | cat", 2000))
	if code != 0 || !strings.Contains(out, "too many segments: 2001 (the limit is 256)") {
		t.Fatalf("explain: exit %d\n%.600s", code, out)
	}
	out, errOut, code := runGated(t, home, wd, "echo hi"+strings.Repeat(" | head", 255))
	if code != 0 || strings.TrimSpace(out) != "hi" {
		t.Fatalf("256 segments: exit %d %q %s", code, out, errOut)
	}
}

// TestGateAllowlistCaseSensitive: on Linux the pattern DIR/bin/tool does
// not match the different file DIR/BIN/TOOL.
func TestGateAllowlistCaseSensitive(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"bin/tool", "BIN/TOOL"} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("#!/bin/sh\necho ran "+p+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"off"`,
		`{"version":1,"agents":{"main":{"allowlist":[{"pattern":"`+filepath.Join(dir, "bin/tool")+`"}]}}}`)
	out, errOut, code := runGated(t, home, dir, filepath.Join(dir, "bin/tool"))
	if code != 0 || strings.TrimSpace(out) != "ran bin/tool" {
		t.Fatalf("bin/tool: exit %d %q %s", code, out, errOut)
	}
	if out := mustDeny(t, home, dir, filepath.Join(dir, "BIN/TOOL")); strings.Contains(out, "ran") {
		t.Fatalf("BIN/TOOL ran: %s", out)
	}
}

// TestGateWrapperFileAccess: wrappers that touch files themselves. With
// only echo allowlisted, `xargs -a FILE echo` printed FILE; `nohup echo`
// run with a PTY appended to ./nohup.out. Both are denied and touch
// nothing; the harmless forms still run.
func TestGateWrapperFileAccess(t *testing.T) {
	home := gatedDefaults(t, "")
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "secret"), []byte("SECRET-LINE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"xargs -a secret echo", "xargs --arg-file=secret echo", "xargs -0rasecret echo", "echo x | xargs -p echo"} {
		if out := mustDeny(t, home, wd, cmd); strings.Contains(out, "SECRET") {
			t.Fatalf("%q read the file: %s", cmd, out)
		}
	}
	out, errOut, code := runGated(t, home, wd, "echo a b | xargs -n 1 echo")
	if code != 0 || out != "a\nb\n" {
		t.Fatalf("xargs -n 1 echo: exit %d %q %s", code, out, errOut)
	}
	out, errOut, code = e2etest.RunCLI(t, nil, "exec", "--home", home, "-C", wd, "--pty", "--", "nohup echo hi")
	if code != e2etest.ExitDenied || !strings.Contains(out+errOut, "exec denied") {
		t.Fatalf("nohup with a PTY: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(wd, "nohup.out")); !os.IsNotExist(err) {
		t.Fatalf("nohup.out was written: %v", err)
	}
	out, errOut, code = runGated(t, home, wd, "nohup echo hi")
	if code != 0 || strings.TrimSpace(out) != "hi" {
		t.Fatalf("nohup without a PTY: exit %d %q %s", code, out, errOut)
	}
}

// TestGateEnvStartupFiles: a request's environment cannot make the shell
// run the home's rc file (bash -c sources ~/.bashrc when SSH_CLIENT is set
// and SHLVL < 2) or the tools load files it names (LANGUAGE=../../x loads
// x/LC_MESSAGES/<tool>.mo, LOCPATH a locale).
func TestGateEnvStartupFiles(t *testing.T) {
	home := gatedDefaults(t, "")
	wd := t.TempDir()
	userHome := t.TempDir()
	marker := filepath.Join(wd, "RAN")
	if err := os.WriteFile(filepath.Join(userHome, ".bashrc"), []byte("echo x > "+marker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{
		{"SSH_CLIENT=127.0.0.1 1 22", "SHLVL=0"},
		{"SSH2_CLIENT=127.0.0.1 1 22", "SHLVL=0"},
		{"LANGUAGE=../../../../" + strings.TrimPrefix(wd, "/")},
		{"LOCPATH=" + wd, "LC_ALL=xx"},
		{"TZ=" + filepath.Join(wd, "secret")},
	} {
		args := []string{"exec", "--home", home, "-C", wd}
		for _, kv := range env {
			args = append(args, "--env", kv)
		}
		out, errOut, code := e2etest.RunCLI(t, []string{"HOME=" + userHome, "SHELL=/bin/bash"}, append(args, "--", "echo hi")...)
		if code == 0 || !strings.Contains(out+errOut, "Security Violation") {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", env, code, out, errOut)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%v: ~/.bashrc ran", env)
		}
	}
	out, errOut, code := e2etest.RunCLI(t, []string{"HOME=" + userHome, "SHELL=/bin/bash"}, "exec", "--home", home, "-C", wd, "--env", "TZ=Europe/Paris", "--env", "LANGUAGE=fr:en", "--", "echo hi")
	if code != 0 || strings.TrimSpace(out) != "hi" {
		t.Fatalf("TZ=Europe/Paris LANGUAGE=fr:en: exit %d %q %s", code, out, errOut)
	}
}

// TestGateZshParameterFlag: `echo $~X` passes bash as a literal word, but
// zsh reads $~X as X's value made a pattern, whose e qualifier runs code:
// with X='/(e:touch FILE:)' from the request, zsh (the user's shell, or a
// zsh -f -c wrapper) ran it. The command is denied and nothing runs.
func TestGateZshParameterFlag(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh is not installed (.ci/run installs it)")
	}
	home := gatedDefaults(t, "")
	wd := t.TempDir()
	marker := filepath.Join(wd, "RAN")
	for _, cmd := range []string{"echo $~X", "echo a$~X", "zsh -f -c 'echo $~X'"} {
		out, errOut, code := e2etest.RunCLI(t, []string{"SHELL=" + zsh}, "exec", "--home", home, "-C", wd, "--env", "X=/(e:touch "+marker+":)", "--", cmd)
		if code != e2etest.ExitDenied || !strings.Contains(out+errOut, "exec denied") {
			t.Errorf("%q: exit %d\nstdout: %s\nstderr: %s", cmd, code, out, errOut)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%q ran the e qualifier", cmd)
		}
	}
	out, errOut, code := e2etest.RunCLI(t, []string{"SHELL=" + zsh}, "exec", "--home", home, "-C", wd, "--env", "X=/(e:touch "+marker+":)", "--", "echo '$~X' \\$~X")
	if code != 0 || strings.TrimSpace(out) != "$~X $~X" {
		t.Fatalf("quoted: exit %d %q %s", code, out, errOut)
	}
}

// TestGateZshSubscript: with zsh as the user's shell, "$HOME[X]" is a
// subscript zsh evaluates as arithmetic, and X='HOME[$(touch RAN)]' from
// the request ran touch; the gate refuses the word, and "${HOME}[X]" runs
// as the literal bash reads.
func TestGateZshSubscript(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh is not installed (.ci/run installs it)")
	}
	home := gatedDefaults(t, "")
	wd := t.TempDir()
	marker := filepath.Join(wd, "RAN")
	x := "X=HOME[$(touch " + marker + ")]"
	for _, cmd := range []string{"echo $HOME[X]", `echo "$HOME[X]"`, "echo a$PWD[X]", "zsh -f -c 'echo $HOME[X]'"} {
		out, errOut, code := e2etest.RunCLI(t, []string{"SHELL=" + zsh}, "exec", "--home", home, "-C", wd, "--env", x, "--", cmd)
		if code != e2etest.ExitDenied || !strings.Contains(out+errOut, "exec denied") {
			t.Errorf("%q: exit %d\nstdout: %s\nstderr: %s", cmd, code, out, errOut)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%q ran the subscript's command substitution", cmd)
		}
	}
	out, errOut, code := e2etest.RunCLI(t, []string{"SHELL=" + zsh}, "exec", "--home", home, "-C", wd, "--env", x, "--", `echo "${PWD}[X]"`)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "[X]") {
		t.Fatalf("braces: exit %d %q %s", code, out, errOut)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("${PWD}[X] ran the command substitution")
	}
}

// TestGateNonPOSIXShell: the gate parses commands as bash; a user's shell
// that reads them otherwise must not run them. Under tcsh a backslash does
// not escape a double quote, so the one argument bash reads in
// `echo "a\" ; touch RAN ; echo "\"` was three commands to tcsh, and the
// allowlisted echo ran touch. conch runs commands under bash when $SHELL
// is not a POSIX shell, gated or not.
func TestGateNonPOSIXShell(t *testing.T) {
	var shells []string
	for _, name := range []string{"tcsh", "csh", "fish"} {
		if p, err := exec.LookPath(name); err == nil {
			shells = append(shells, p)
		}
	}
	if len(shells) == 0 {
		t.Skip("no tcsh, csh or fish installed (.ci/run installs tcsh)")
	}
	home := gatedDefaults(t, "")
	wd := t.TempDir()
	marker := filepath.Join(wd, "RAN")
	cmd := `echo "a\" ; touch ` + marker + ` ; echo "\"`
	for _, sh := range shells {
		out, errOut, code := e2etest.RunCLI(t, []string{"SHELL=" + sh}, "exec", "--home", home, "-C", wd, "--", cmd)
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("SHELL=%s: %q ran touch (exit %d %q %s)", sh, cmd, code, out, errOut)
		}
		if want := `a" ; touch ` + marker + ` ; echo "`; code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("SHELL=%s: exit %d %q, want %q (%s)", sh, code, out, want, errOut)
		}
	}
}
