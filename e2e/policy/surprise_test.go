package policy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A foreground command that starts servers with & and ends says in its
// text that they were stopped, for any number of them; a command that
// leaves nothing behind, or that was itself killed, says nothing of it.
func TestLeftoverProcessesSaid(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	for n := 1; n <= 3; n++ {
		cmd := ""
		for i := 0; i < n; i++ {
			cmd += fmt.Sprintf("sleep 913.%d & ", i+1)
		}
		r := c.Exec(map[string]any{"command": cmd + "echo started"})
		want := "started\n\n" + e2etest.LeftoverNote(n, false)
		if r.Str("status") != "completed" || r.Text != want || r.Num("descendantsKilled") != float64(n) {
			t.Errorf("%d left running:\n got %q %v\nwant %q", n, r.Text, r.D["descendantsKilled"], want)
		}
	}
	// A failing command says it too, after its exit code.
	r := c.Exec(map[string]any{"command": "sleep 913.4 & echo started; exit 3"})
	if want := "started\n\n(Command exited with code 3)\n\n" + e2etest.LeftoverNote(1, false); r.Text != want {
		t.Errorf("exit 3:\n got %q\nwant %q", r.Text, want)
	}
	for _, cmd := range []string{"echo plain", "sleep 0.1 & wait; echo waited"} {
		if r := c.Exec(map[string]any{"command": cmd}); strings.Contains(r.Text, "stopped when it ended") || r.IsError {
			t.Errorf("%s: %q", cmd, r.Text)
		}
	}
	// Killed by its timeout: the tree goes by request; no note.
	r = c.Exec(map[string]any{"command": "sleep 913.5 & sleep 913.6", "timeout": 1})
	if r.Str("state") != "killed" || strings.Contains(r.Text, "stopped when it ended") {
		t.Errorf("timeout: %q %v", r.Text, r.D)
	}

	// A background session: the poll that sees its end says it, with
	// the advice that fits a session.
	r = c.Exec(map[string]any{"command": "sleep 913.7 & echo hi", "background": true})
	p := c.WaitEnd(r.Str("sessionId"), 30*time.Second)
	if want := "Process exited with code 0.\n" + e2etest.LeftoverNote(1, true); !strings.HasSuffix(p.Text, want) {
		t.Errorf("background poll:\n got %q\nwant suffix %q", p.Text, want)
	}
	if left := e2etest.PgrepHome("^sleep 913", c.Home); len(left) > 0 {
		t.Errorf("left running: %v", left)
	}
}

// Each outcome of an approval-gated run is told once, by its approval
// event: denied by a person, timed out into a denial, approved, run by the
// timeout fallback. Never an exit notice as well.
func TestApprovalOutcomeOneNotice(t *testing.T) {
	echo := echoPath(t)
	home := e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","security":"allowlist","ask":"always","askFallback":"allowlist"}},"approvals":{"timeoutMs":10000}}`)
	if err := os.WriteFile(filepath.Join(home, "exec-approvals.json"), []byte(`{"version":1,"agents":{"main":{"allowlist":[{"pattern":"`+echo+`"}]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := e2etest.StartConch(t, home)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.CS.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	type run struct {
		name, command, decide, want string
		id, slug                    string
	}
	runs := []*run{
		{name: "denied", command: "echo o-denied", decide: "deny", want: "Exec denied (gateway id="},
		{name: "approved", command: "echo o-approved", decide: "approve", want: "Exec finished (gateway id="},
		{name: "timeout, allowlisted", command: "echo o-fallback", want: "Exec finished (gateway id="},
		{name: "timeout, allowlist miss", command: "true o-miss", want: "Exec denied (gateway id="},
	}
	// Each decision right after its request, well within the 10 s the
	// request waits.
	for _, r := range runs {
		res := c.Exec(map[string]any{"command": r.command})
		r.id, r.slug = res.Str("sessionId"), res.Str("approvalSlug")
		if res.Str("status") != "approval-pending" || r.id == "" {
			t.Fatalf("%s: %q %v", r.name, res.Text, res.D)
		}
		if r.decide != "" {
			if out, code := e2etest.CLI(t, "approvals", r.decide, r.slug, "--home", home); code != 0 {
				t.Fatalf("%s: %s %d %s", r.name, r.decide, code, out)
			}
		}
	}
	notices := func(id string) []string {
		c.Mu.Lock()
		defer c.Mu.Unlock()
		var out []string
		for _, l := range c.Logs {
			if d, _ := l.Data.(map[string]any); d["sessionId"] == id {
				out = append(out, fmt.Sprint(d["text"]))
			}
		}
		return out
	}
	for _, r := range runs {
		c.WaitEnd(r.id, 60*time.Second)
		e2etest.Eventually(t, 10*time.Second, func() string {
			if ns := notices(r.id); len(ns) == 0 {
				return r.name + ": no notice yet"
			}
			return ""
		})
	}
	// Anything queued with the first notice has been pushed by now; one
	// more round trip for good measure.
	c.Process(map[string]any{"action": "list"})
	for _, r := range runs {
		ns := notices(r.id)
		if len(ns) != 1 || !strings.HasPrefix(ns[0], r.want) {
			t.Errorf("%s: notices %q, want one starting %q", r.name, ns, r.want)
		}
		// The inline copies agree.
		n := 0
		c.Mu.Lock()
		for _, e := range c.Events {
			if strings.Contains(e, r.id) || strings.Contains(e, r.command) {
				n++
			}
		}
		c.Mu.Unlock()
		if n > 1 {
			t.Errorf("%s: %d inline events: %q", r.name, n, c.Events)
		}
	}
}

// The process tool without an action names the field and the actions,
// whatever form the missing action takes.
func TestProcessActionRequired(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	want := "action is required: one of list, poll, log, wait, search, screen, write, send-keys, submit, paste, kill, clear, remove."
	for _, args := range []map[string]any{
		{},
		{"action": ""},
		{"action": "  "},
		{"action": nil},
		{"sessionId": "x"},
	} {
		r := c.Call("process", args)
		errObj, _ := r.D["error"].(map[string]any)
		if !r.IsError || r.Text != want || errObj["code"] != "invalid_argument" {
			t.Errorf("%v: %q %v", args, r.Text, r.D)
		}
	}
	if r := c.Call("process", map[string]any{"action": "dance"}); r.Text != "Unknown action dance" {
		t.Errorf("unknown action: %q", r.Text)
	}
}

// workdir "~" and "~/…" are the home of the user conch runs as; "~user"
// is not expanded.
func TestWorkdirTilde(t *testing.T) {
	fake := t.TempDir()
	if r, err := filepath.EvalSymlinks(fake); err == nil {
		fake = r
	}
	if err := os.Mkdir(filepath.Join(fake, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := e2etest.StartConchEnv(t, e2etest.NewHome(t, ""), []string{"HOME=" + fake})
	for _, tc := range []struct{ workdir, want string }{
		{"~", fake},
		{"~/", fake},
		{"~/sub", filepath.Join(fake, "sub")},
		{"~/sub/", filepath.Join(fake, "sub")},
	} {
		r := c.Exec(map[string]any{"command": "pwd -P", "workdir": tc.workdir})
		// (HOME is not the test's: conch probes this home's login shell,
		// and a first call may say it ran before that finished.)
		if text := strings.TrimPrefix(r.Text, loginNotKnown+"\n\n"); text != tc.want || r.Str("cwd") != tc.want {
			t.Errorf("workdir %q: %q cwd %q, want %q", tc.workdir, r.Text, r.Str("cwd"), tc.want)
		}
	}
	r := c.Exec(map[string]any{"command": "pwd", "workdir": "~conch-no-such-user"})
	if !strings.Contains(r.Text, `Warning: workdir "~conch-no-such-user" is unavailable; using `) {
		t.Errorf("~user: %q", r.Text)
	}
}

// loginNotKnown is the warning of a gateway run that started before the
// login-shell PATH probe finished.
const loginNotKnown = "Warning: the login-shell PATH is not known yet (its probe is still running); this command ran with conch's own PATH. Later commands get the login-shell PATH."

// The login-shell PATH probe never holds the first exec past its yield
// window, and its result is cached in the home: the next engine and
// `conch policy explain` do not run it again. The fake login shell is
// /bin/sh with a .profile that records each run and then blocks until the
// test releases it, so "before the probe ends" is an event, not a time.
func TestFirstCallNoStall(t *testing.T) {
	if b, err := os.ReadFile("/etc/shells"); err != nil || !strings.Contains("\n"+string(b)+"\n", "\n/bin/sh\n") {
		t.Skip("/bin/sh is not a login shell listed in /etc/shells here")
	}
	fake := t.TempDir()
	if r, err := filepath.EvalSymlinks(fake); err == nil {
		fake = r
	}
	bin := filepath.Join(fake, "login-bin")
	os.Mkdir(bin, 0o755)
	if err := os.WriteFile(filepath.Join(bin, "conch-login-tool"), []byte("#!/bin/sh\necho login-tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	probed, release := filepath.Join(fake, "probed"), filepath.Join(fake, "release")
	profile := `echo x >> "$HOME/probed"
while [ ! -e "$HOME/release" ]; do sleep 0.05; done
PATH="$HOME/login-bin:$PATH"; export PATH
`
	if err := os.WriteFile(filepath.Join(fake, ".profile"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := func() int {
		b, _ := os.ReadFile(probed)
		return strings.Count(string(b), "x")
	}
	env := []string{"HOME=" + fake, "SHELL=/bin/sh", "CONCH_SHELL_ENV_TIMEOUT_MS=300000"}
	home := e2etest.NewHome(t, "")
	t.Cleanup(func() { os.WriteFile(release, nil, 0o644) }) // never leave the probe blocked

	c := e2etest.StartConchEnv(t, home, env)
	// The probe starts with the engine, before any call.
	e2etest.Eventually(t, 30*time.Second, func() string {
		if runs() != 1 {
			return "the probe did not start with the engine"
		}
		return ""
	})
	start := time.Now()
	r := c.Exec(map[string]any{"command": `echo "$PATH"; command -v conch-login-tool || echo no-tool`, "yieldMs": 500})
	took := time.Since(start)
	if r.Str("status") != "completed" || !strings.HasPrefix(r.Text, loginNotKnown+"\n\n") || strings.Contains(r.Text, bin) ||
		!strings.HasSuffix(r.Text, "\nno-tool") {
		t.Fatalf("first call while the probe runs (%v): %q", took, r.Text)
	}
	// The yield window still applies: a long command is backgrounded
	// while the probe is blocked.
	r = c.Exec(map[string]any{"command": "sleep 917.1", "yieldMs": 500})
	if r.Str("status") != "running" {
		t.Fatalf("long command while the probe runs: %q", r.Text)
	}
	c.Process(map[string]any{"action": "kill", "sessionId": r.Str("sessionId")})
	if r = c.Exec(map[string]any{"command": "echo bg", "background": true}); r.Str("status") != "running" {
		t.Fatalf("background call while the probe runs: %q", r.Text)
	}
	if runs() != 1 {
		t.Fatalf("the probe ran %d times", runs())
	}

	// Released: the probe ends, its result is cached, and later calls
	// get the login PATH.
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// (e2etest.NewHome put a cache for the test's own environment there; the
	// probe replaces it.)
	cache := filepath.Join(home, "state", "login-path.json")
	e2etest.Eventually(t, 30*time.Second, func() string {
		if b, _ := os.ReadFile(cache); !strings.Contains(string(b), bin) {
			return "no cache of the probe's result: " + string(b)
		}
		return ""
	})
	if fi, _ := os.Stat(cache); fi.Mode().Perm() != 0o600 {
		t.Errorf("cache file mode %v", fi.Mode())
	}
	r = c.Exec(map[string]any{"command": `echo "$PATH"; conch-login-tool`, "yieldMs": 500})
	if !strings.HasPrefix(r.Text, bin+":") || !strings.HasSuffix(r.Text, "\nlogin-tool") {
		t.Fatalf("after the probe: %q", r.Text)
	}
	c.Close()

	// A new engine with the same shell set-up: the cache answers. With
	// the release file gone a probe would block, and the marker counts
	// runs.
	os.Remove(release)
	c = e2etest.StartConchEnv(t, home, env)
	r = c.Exec(map[string]any{"command": "conch-login-tool", "yieldMs": 500})
	if r.Text != "login-tool" {
		t.Fatalf("second engine's first call: %q", r.Text)
	}
	cmd := exec.Command(e2etest.ConchBin, "policy", "explain", "--home", home, "--json", "--", "conch-login-tool")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), filepath.Join(bin, "conch-login-tool")) {
		t.Fatalf("policy explain: %v %s", err, out)
	}
	if n := runs(); n != 1 {
		t.Fatalf("the probe ran %d times; the cache should have answered", n)
	}

	// Editing the profile invalidates the cache: the next engine probes
	// again (and its first call does not wait for it).
	if err := os.WriteFile(filepath.Join(fake, ".profile"), []byte(profile+"# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = e2etest.StartConchEnv(t, home, env)
	e2etest.Eventually(t, 30*time.Second, func() string {
		if runs() != 2 {
			return "an edited profile did not make the probe run again"
		}
		return ""
	})
	if r = c.Exec(map[string]any{"command": "true", "yieldMs": 500}); !strings.HasPrefix(r.Text, loginNotKnown) {
		t.Fatalf("first call with the probe running again: %q", r.Text)
	}
}

// On a node, workdir "~" is the node's home, and the node does not probe
// a login shell for a PATH (its commands run as `/bin/sh -lc`, which reads
// the profile itself). The profile records the directory it runs in: the
// probe runs in "/", the commands in their workdir.
func TestNodeWorkdirTildeNoProbe(t *testing.T) {
	t.Parallel()
	fake := t.TempDir()
	if r, err := filepath.EvalSymlinks(fake); err == nil {
		fake = r
	}
	os.Mkdir(filepath.Join(fake, "sub"), 0o755)
	if err := os.WriteFile(filepath.Join(fake, ".profile"), []byte(`pwd >> "$HOME/probed"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := e2etest.StartNodeGateway(t, e2etest.NewHome(t, e2etest.NodeGatewayConfig), "127.0.0.1:0")
	e2etest.PairNode(t, g, "tilde", e2etest.NodeFullConfig, "env", "HOME="+fake, "SHELL=/bin/sh")
	for _, tc := range []struct{ workdir, want string }{
		{"~", fake},
		{"~/sub", filepath.Join(fake, "sub")},
	} {
		r := e2etest.ExecOK(t, g, map[string]any{"command": `pwd -P`, "workdir": tc.workdir})
		if text, _ := r["text"].(string); text != tc.want {
			t.Errorf("node, workdir %q: %v", tc.workdir, r)
		}
	}
	b, _ := os.ReadFile(filepath.Join(fake, "probed"))
	if strings.Contains("\n"+string(b), "\n/\n") {
		t.Errorf("the node ran a login-shell probe (profile runs in: %q)", b)
	}
}

// The policy gate resolves a command with exactly the PATH it then runs
// with, before and after the login-shell PATH is known. Two programs of
// the same name: one in a directory of conch's own PATH (allowlisted), one
// in the login shell's (not). While the probe is blocked the first is
// judged and run; once the login PATH is known, the second comes first
// and is refused, never run under the first one's verdict.
func TestFirstCallGateSamePATH(t *testing.T) {
	if b, err := os.ReadFile("/etc/shells"); err != nil || !strings.Contains("\n"+string(b)+"\n", "\n/bin/sh\n") {
		t.Skip("/bin/sh is not a login shell listed in /etc/shells here")
	}
	fake := t.TempDir()
	if r, err := filepath.EvalSymlinks(fake); err == nil {
		fake = r
	}
	own, login := filepath.Join(fake, "own-bin"), filepath.Join(fake, "login-bin")
	for dir, says := range map[string]string{own: "own-tool", login: "login-tool"} {
		os.Mkdir(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, "conch-gate-tool"), []byte("#!/bin/sh\necho "+says+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	release := filepath.Join(fake, "release")
	profile := `while [ ! -e "$HOME/release" ]; do sleep 0.05; done
PATH="$HOME/login-bin:$PATH"; export PATH
`
	if err := os.WriteFile(filepath.Join(fake, ".profile"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(release, nil, 0o644) })
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"off"`,
		`{"version":1,"agents":{"main":{"allowlist":[{"pattern":"`+filepath.Join(own, "conch-gate-tool")+`"}]}}}`)
	c := e2etest.StartConchEnv(t, home, []string{"HOME=" + fake, "SHELL=/bin/sh", "CONCH_SHELL_ENV_TIMEOUT_MS=300000",
		"PATH=" + own + ":" + os.Getenv("PATH")})

	r := c.Exec(map[string]any{"command": "conch-gate-tool", "yieldMs": 500})
	if r.Text != loginNotKnown+"\n\nown-tool" {
		t.Fatalf("before the login PATH is known: %q %v", r.Text, r.D)
	}
	os.WriteFile(release, nil, 0o644)
	e2etest.Eventually(t, 30*time.Second, func() string {
		if b, _ := os.ReadFile(filepath.Join(home, "state", "login-path.json")); !strings.Contains(string(b), login) {
			return "the probe did not finish"
		}
		return ""
	})
	r = c.Exec(map[string]any{"command": "conch-gate-tool", "yieldMs": 500})
	if !r.IsError || !strings.HasPrefix(r.Text, "exec denied: ") || strings.Contains(r.Text, "-tool\n") {
		t.Fatalf("after: the login shell's program was not refused: %q %v", r.Text, r.D)
	}
}

// logLines reads a session's whole rendered log (one stream or both) in
// pages that stay under the result cap.
func logLines(t *testing.T, c *e2etest.Conch, id, stream string) []string {
	t.Helper()
	var out []string
	for off := 0; ; off += 1000 {
		r := c.Process(map[string]any{"action": "log", "sessionId": id, "stream": stream, "offset": off, "limit": 1000})
		total := int(r.Num("totalLines"))
		if r.IsError || total < 0 {
			t.Fatalf("log %s at %d: %q %v", stream, off, r.Text, r.D)
		}
		if off >= total {
			return out
		}
		out = append(out, strings.Split(r.Text, "\n")...)
	}
}

// What conch guarantees about stdout and stderr, checked on a command that
// writes both fast: each stream complete and in order, every line under
// its own stream; and the exact order between them with 2>&1 or a PTY.
// (The order between two pipes is not guaranteed, so it is not asserted.)
func TestStreamOrderGuarantees(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	const n, every = 6000, 50
	script := fmt.Sprintf(`awk 'BEGIN{for(i=1;i<=%d;i++){print i; fflush(); if(i%%%d==0){print "E" i > "/dev/stderr"; fflush("/dev/stderr")}}}'`, n, every)
	var wantOut, wantErr, wantBoth []string
	for i := 1; i <= n; i++ {
		wantOut = append(wantOut, fmt.Sprint(i))
		wantBoth = append(wantBoth, fmt.Sprint(i))
		if i%every == 0 {
			wantErr = append(wantErr, fmt.Sprintf("E%d", i))
			wantBoth = append(wantBoth, fmt.Sprintf("E%d", i))
		}
	}
	same := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: %d lines, want %d; first difference at line %d", what, len(got), len(want), i)
		}
	}
	run := func(args map[string]any) string {
		args["background"] = true
		id := c.Exec(args).Str("sessionId")
		if p := c.WaitEnd(id, 120*time.Second); p.Num("exitCode") != 0 {
			t.Fatalf("%v: %q", args, p.Text)
		}
		return id
	}

	id := run(map[string]any{"command": script})
	same("pipes, stdout", logLines(t, c, id, "stdout"), wantOut)
	same("pipes, stderr", logLines(t, c, id, "stderr"), wantErr)
	if both := logLines(t, c, id, "both"); len(both) != len(wantBoth) {
		t.Errorf("pipes, both streams: %d lines, want %d", len(both), len(wantBoth))
	}

	id = run(map[string]any{"command": script + " 2>&1"})
	same("2>&1, both", logLines(t, c, id, "both"), wantBoth)

	id = run(map[string]any{"command": script, "pty": true})
	same("pty, both", logLines(t, c, id, "both"), wantBoth)
}
