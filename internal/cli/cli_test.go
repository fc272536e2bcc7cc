package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// These tests drive the real conch binary, built once in TestMain, over
// the whole command tree as NewRoot builds it: a command added later is
// covered without touching them.

var conchBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "conch-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	conchBin = filepath.Join(dir, "conch")
	build := exec.Command("go", "build", "-o", conchBin, "github.com/conchsh/conch/cmd/conch")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build conch:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// slow scales a deadline by CONCH_TEST_SLOW (default 1).
func slow(d time.Duration) time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv("CONCH_TEST_SLOW"), 64); err == nil && f > 0 {
		return time.Duration(float64(d) * f)
	}
	return d
}

// conch runs the binary with a home of its own (unless args name one),
// without the caller's CONCH_ variables, and returns stdout, stderr and
// the exit code.
func conch(t *testing.T, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), slow(90*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, conchBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONCH_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "CONCH_HOME="+filepath.Join(t.TempDir(), "home"))
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
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

// commandPaths lists every command of the tree as its words after
// "conch", the root as an empty path.
func commandPaths(t *testing.T) [][]string {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, s := range c.Commands() {
			if s.Hidden {
				continue
			}
			walk(s, append(append([]string(nil), path...), s.Name()))
		}
	}
	walk(NewRoot(), nil)
	if len(paths) < 40 {
		t.Fatalf("only %d commands in the tree", len(paths))
	}
	return paths
}

// TestEveryCommandHasHelp: every command and subcommand answers --help,
// -h and `conch help PATH` on stdout with exit 0, a Usage section and its
// own name; none runs instead (version --help prints help, not the
// version).
func TestEveryCommandHasHelp(t *testing.T) {
	for _, path := range commandPaths(t) {
		name := "conch " + strings.Join(path, " ")
		forms := [][]string{append(append([]string(nil), path...), "--help"), append(append([]string(nil), path...), "-h")}
		if len(path) > 0 {
			forms = append(forms, append([]string{"help"}, path...))
		}
		for _, args := range forms {
			out, errOut, code := conch(t, nil, "", args...)
			if code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, strings.TrimSpace(name)) {
				t.Errorf("conch %s: exit %d, want 0 and a Usage section naming %q\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, name, out, errOut)
			}
			if strings.HasPrefix(out, "conch ") && strings.Contains(strings.SplitN(out, "\n", 2)[0], "(") {
				t.Errorf("conch %s printed the version, not help: %q", strings.Join(args, " "), out)
			}
		}
	}
}

// TestEveryCommandRefusesAnUnknownFlag: a wrong flag on any command is a
// short error that names the flag and where help is, and the usage exit
// code (exec: its own 125, since its other codes are the command's).
func TestEveryCommandRefusesAnUnknownFlag(t *testing.T) {
	for _, path := range commandPaths(t) {
		args := append(append([]string(nil), path...), "--no-such-flag")
		out, errOut, code := conch(t, nil, "", args...)
		want := ExitUsage
		if len(path) == 1 && path[0] == "exec" {
			want = ExitConchError
		}
		cmdPath := strings.TrimSpace("conch " + strings.Join(path, " "))
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != want || out != "" || len(lines) > 2 || !strings.Contains(errOut, "unknown flag: --no-such-flag") ||
			!strings.Contains(errOut, "Run '"+cmdPath+" --help' for usage.") {
			t.Errorf("%s --no-such-flag: exit %d (want %d), stdout %q, stderr:\n%s", cmdPath, code, want, out, errOut)
		}
	}
}

// TestSingleDashLongFlags: the single-dash spelling of long flags that the
// Go flag package accepted (-home DIR, -json) still works.
func TestSingleDashLongFlags(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	out, errOut, code := conch(t, nil, "", "ledger", "tail", "-home", home, "-json", "-n", "1")
	if code != 0 {
		t.Fatalf("ledger tail -home H -json -n 1: exit %d: %s", code, errOut)
	}
	out2, _, code := conch(t, nil, "", "doctor", "-json", "-home="+home)
	if code > 1 || !strings.HasPrefix(out2, "[") {
		t.Fatalf("doctor -json -home=H: exit %d: %q", code, out2)
	}
	// --C was -C for the Go flag package.
	dir := t.TempDir()
	out, errOut, code = conch(t, nil, "", "exec", "-home", home, "--C", dir, "--", "pwd")
	if code != 0 || out != dir+"\n" {
		t.Fatalf("exec --C DIR -- pwd: exit %d, %q %q", code, out, errOut)
	}
	// After "--", a single-dash word belongs to the command.
	out, errOut, code = conch(t, nil, "", "exec", "-home", home, "--", "echo", "-home")
	if code != 0 || out != "-home\n" {
		t.Fatalf("exec -home H -- echo -home: exit %d, %q %q", code, out, errOut)
	}
}

// TestCompletionScripts: the completion scripts parse in their shells.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range []struct{ name, check string }{{"bash", "bash"}, {"zsh", "zsh"}, {"fish", "fish"}, {"powershell", ""}} {
		out, errOut, code := conch(t, nil, "", "completion", sh.name)
		if code != 0 || len(out) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes: %s", sh.name, code, len(out), errOut)
			continue
		}
		if sh.check == "" {
			continue
		}
		bin, err := exec.LookPath(sh.check)
		if err != nil {
			t.Logf("completion %s: %s not installed, syntax not checked", sh.name, sh.check)
			continue
		}
		f := filepath.Join(t.TempDir(), "conch."+sh.name)
		os.WriteFile(f, []byte(out), 0o600)
		if b, err := exec.Command(bin, "-n", f).CombinedOutput(); err != nil {
			t.Errorf("%s -n on the %s completion: %v\n%s", sh.check, sh.name, err, b)
		}
	}
	// The bash script completes the command names.
	if _, err := exec.LookPath("bash"); err == nil {
		out, _, _ := conch(t, nil, "", "__complete", "app")
		if !strings.Contains(out, "approvals") || !strings.Contains(out, "apply-patch") {
			t.Errorf("__complete app: %q", out)
		}
	}
}

// TestExitCodeTableInDocs: the exit-code table of docs/cli.md is ExitCodes,
// row for row.
func TestExitCodeTableInDocs(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `(\\d+)` \\| `([a-z-]+)` \\| (.*) \\|$")
	var got []ExitCode
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Exit codes"
			continue
		}
		if m := row.FindStringSubmatch(line); in && m != nil {
			n, _ := strconv.Atoi(m[1])
			got = append(got, ExitCode{n, m[2], m[3]})
		}
	}
	var want strings.Builder
	for _, e := range ExitCodes {
		fmt.Fprintf(&want, "| `%d` | `%s` | %s |\n", e.Code, e.Name, e.Meaning)
	}
	var have strings.Builder
	for _, e := range got {
		fmt.Fprintf(&have, "| `%d` | `%s` | %s |\n", e.Code, e.Name, e.Meaning)
	}
	if have.String() != want.String() {
		t.Fatalf("docs/cli.md \"## Exit codes\" table differs from ExitCodes; it should read:\n%s\nit reads:\n%s", want.String(), have.String())
	}
}

// TestExitCodesProduced: each code of the table comes out of the binary in
// a representative case (through the in-process engine, the home's files
// or a real conch serve).
func TestExitCodesProduced(t *testing.T) {
	newHome := func(config string) string {
		h := filepath.Join(t.TempDir(), "home")
		os.MkdirAll(h, 0o700)
		if config != "" {
			os.WriteFile(filepath.Join(h, "config.json"), []byte(config), 0o600)
		}
		return h
	}
	plain := newHome("")
	gated := newHome(`{"tools":{"exec":{"host":"gateway","security":"allowlist","ask":"always"}}}`)
	denied := newHome(`{"tools":{"exec":{"host":"gateway","security":"deny"}}}`)
	bad := newHome(`{"tools":{"exec":{"nosuchfield":1}}}`)

	cases := []struct {
		code int
		args []string
	}{
		{ExitOK, []string{"exec", "--home", plain, "--", "true"}},
		{ExitFailed, []string{"doctor", "--home", plain}}, // agent main is not gated: a warning
		{ExitUsage, []string{"ps", "--home", plain, "extra-argument"}},
		{ExitUsage, []string{"approvals"}},
		{ExitUsage, []string{"approvals", "no-such-subcommand"}},
		{ExitUsage, []string{"help", "no-such-command"}},
		{ExitUsage, []string{"no-such-command"}},
		{ExitUsage, nil},
		{ExitNotFound, []string{"poll", "--home", plain, "no-such-session"}},
		{ExitNotFound, []string{"approvals", "approve", "--home", plain, "no-such-approval"}},
		{ExitUnavailable, []string{"agents", "list", "--home", plain}},
		{ExitNoWait, []string{"exec", "--home", gated, "--no-wait", "--", "echo", "hi"}},
		{ExitDenied, []string{"exec", "--home", denied, "--", "echo", "hi"}},
		{ExitConfig, []string{"exec", "--home", bad, "--", "true"}},
		{ExitConfig, []string{"policy", "explain", "--home", bad, "--", "ls"}},
		{ExitTimeout, []string{"exec", "--home", plain, "-t", "0.5", "--", "sleep 30"}},
		{ExitConchError, []string{"exec", "--home", plain}},
	}
	seen := map[int]bool{}
	for _, c := range cases {
		_, errOut, code := conch(t, nil, "", c.args...)
		if code != c.code {
			t.Errorf("conch %s: exit %d, want %d\n%s", strings.Join(c.args, " "), code, c.code, errOut)
		}
		seen[c.code] = true
	}
	// Forbidden and conflict need a gateway: a real conch serve.
	gw := startServe(t, newHome(""))
	for _, c := range []struct {
		code int
		args []string
	}{
		{ExitForbidden, []string{"ps", "--gateway", gw.base, "--token", "cop_not_the_token"}},
		{ExitOK, []string{"agents", "add", "build", "--home", gw.home}},
		{ExitConflict, []string{"agents", "add", "build", "--home", gw.home}},
		{ExitNotFound, []string{"kill", "--gateway", gw.base, "--token", gw.operator, "no-such-session"}},
	} {
		_, errOut, code := conch(t, nil, "", c.args...)
		if code != c.code {
			t.Errorf("conch %s: exit %d, want %d\n%s", strings.Join(c.args, " "), code, c.code, errOut)
		}
		seen[c.code] = true
	}
	// Not produced here: 130 needs a Ctrl-C before a session exists (see
	// e2e/cli TestCLIInterruptDetaches for Ctrl-C while following).
	for _, e := range ExitCodes {
		if !seen[e.Code] && e.Code != ExitInterrupted {
			t.Errorf("exit code %d (%s) has no case here", e.Code, e.Name)
		}
	}
}

type gateway struct{ base, home, operator string }

// startServe starts conch serve on a free loopback port and waits for its
// banner.
func startServe(t *testing.T, home string) gateway {
	t.Helper()
	cmd := exec.Command(conchBin, "serve", "--home", home, "--listen", "127.0.0.1:0", "--log-level", "warn", "--no-ui")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONCH_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(slow(30 * time.Second)):
			cmd.Process.Kill()
			<-done
		}
	})
	base := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "conch serve: listening on "); ok {
				b, _, _ := strings.Cut(rest, " ")
				base <- b
			}
		}
	}()
	select {
	case b := <-base:
		tok, err := os.ReadFile(filepath.Join(home, "operator.token"))
		if err != nil {
			t.Fatal(err)
		}
		return gateway{base: b, home: home, operator: strings.TrimSpace(string(tok))}
	case <-time.After(slow(60 * time.Second)):
		t.Fatal("conch serve did not start")
	}
	return gateway{}
}
