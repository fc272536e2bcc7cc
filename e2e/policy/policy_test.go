package policy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func echoPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("echo")
	if err != nil {
		t.Skip("no echo binary")
	}
	return p
}

func TestGateAllowlistAskOff(t *testing.T) {
	echo := echoPath(t)
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"off"`, `{"version":1,"agents":{"main":{"allowlist":[{"pattern":"`+echo+`"}]}}}`)
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "echo gated-ok | head -n 1"})
	if r.Str("status") != "completed" || r.Text != "gated-ok" || r.Str("hostReason") != "" {
		t.Fatalf("allowlisted: %q %v", r.Text, r.D)
	}
	for _, cmd := range []string{"ls /", "echo a; ls /", "echo $(id)", "echo a > /tmp/x", "FOO=1 echo a", "sh -c 'ls /'", "env -S 'ls /'", "sudo echo a"} {
		r := c.Exec(map[string]any{"command": cmd})
		if !r.IsError || !strings.HasPrefix(r.Text, "exec denied: ") {
			t.Errorf("%q was not denied: %q %v", cmd, r.Text, r.D)
		}
	}
	r = c.Exec(map[string]any{"command": "echo x", "security": "deny"})
	if r.Text != "exec denied: host=gateway security=deny" {
		t.Fatalf("per-call deny: %q", r.Text)
	}
	// The ledger recorded the evaluations and the run, and verifies.
	c.Close()
	out, code := e2etest.CLI(t, "ledger", "verify", "--home", home)
	if code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("ledger verify: %d %s", code, out)
	}
	out, _ = e2etest.CLI(t, "ledger", "tail", "--home", home, "-n", "100")
	for _, typ := range []string{" evaluate main", " exec main", " end main"} {
		if !strings.Contains(out, typ) {
			t.Errorf("ledger lacks %q:\n%s", typ, out)
		}
	}
}

func TestGateApproveOnceAndAlways(t *testing.T) {
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"on-miss"`, "")
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "ls /"})
	if r.Str("status") != "approval-pending" || r.IsError {
		t.Fatalf("want approval-pending: %q %v", r.Text, r.D)
	}
	slug, id := r.Str("approvalSlug"), r.Str("sessionId")
	want := "Approval required (id " + slug + "). Approve to run; updates will arrive after completion.\nReason: "
	if !strings.HasPrefix(r.Text, want) || !strings.HasSuffix(r.Text, "\nSession: "+id+" (poll it with process for the outcome)") {
		t.Fatalf("text: %q", r.Text)
	}
	p := c.Process(map[string]any{"action": "poll", "sessionId": id})
	if p.Text != "(no new output)\n\nApproval pending (id "+slug+"); the command has not started." || p.Str("status") != "pending" {
		t.Fatalf("poll pending: %q %v", p.Text, p.D)
	}
	if l := c.Process(map[string]any{"action": "list"}); !strings.Contains(l.Text, id+" pending ") {
		t.Fatalf("list: %q", l.Text)
	}
	out, code := e2etest.CLI(t, "approvals", "pending", "--home", home)
	if code != 0 || !strings.Contains(out, slug) || !strings.Contains(out, "ls /") {
		t.Fatalf("pending: %d %s", code, out)
	}
	out, code = e2etest.CLI(t, "approvals", "approve", slug, "--home", home)
	if code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	if out, code = e2etest.CLI(t, "approvals", "deny", slug, "--home", home); code != 5 || !strings.Contains(out, "already resolved") {
		t.Fatalf("second decision: %d %s", code, out)
	}
	p = c.WaitEnd(id, 10*time.Second)
	l := c.Process(map[string]any{"action": "log", "sessionId": id})
	if p.Num("exitCode") != 0 || !strings.Contains(l.Text, "usr") {
		t.Fatalf("approved run: %q log %q", p.Text, l.Text)
	}
	e2etest.Eventually(t, 5*time.Second, func() string {
		c.Process(map[string]any{"action": "list"})
		c.Mu.Lock()
		defer c.Mu.Unlock()
		for _, e := range c.Events {
			if strings.HasPrefix(e, "[conch event] Exec finished (gateway id=") && strings.Contains(e, "session="+id+", code 0)") {
				return ""
			}
		}
		return "no finished event: " + strings.Join(c.Events, " | ")
	})

	// allow-always persists /usr/bin/ls (or wherever ls is) and the next
	// ls runs without asking.
	r = c.Exec(map[string]any{"command": "ls -d /"})
	slug = r.Str("approvalSlug")
	if out, code = e2etest.CLI(t, "approvals", "decide", slug, "always", "--home", home); code != 0 {
		t.Fatalf("decide always: %d %s", code, out)
	}
	c.WaitEnd(r.Str("sessionId"), 10*time.Second)
	b, _ := os.ReadFile(filepath.Join(home, "exec-approvals.json"))
	lsPath, _ := exec.LookPath("ls")
	if !strings.Contains(string(b), `"source": "allow-always"`) || !strings.Contains(string(b), lsPath) {
		t.Fatalf("approvals file after allow-always:\n%s", b)
	}
	r = c.Exec(map[string]any{"command": "ls -d /"})
	if r.Str("status") != "completed" || r.Text != "/" {
		t.Fatalf("after allow-always: %q %v", r.Text, r.D)
	}
}

func TestGateDenyAndWithdraw(t *testing.T) {
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"always"`, "")
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "true"})
	slug, id := r.Str("approvalSlug"), r.Str("sessionId")
	if out, code := e2etest.CLI(t, "approvals", "deny", slug, "--home", home); code != 0 {
		t.Fatalf("deny: %s", out)
	}
	p := c.WaitEnd(id, 10*time.Second)
	if p.Text != "(no new output)\n\nNot run: exec denied (user-denied)." || p.Str("state") != "denied" {
		t.Fatalf("denied poll: %q %v", p.Text, p.D)
	}
	found := false
	for _, e := range c.Events {
		if strings.HasPrefix(e, "[conch event] Exec denied (gateway id=") && strings.HasSuffix(e, ", user-denied): true") {
			found = true
		}
	}
	if !found {
		t.Errorf("no denied event: %v", c.Events)
	}
	if l := c.Process(map[string]any{"action": "list"}); !strings.Contains(l.Text, id+" denied ") {
		t.Fatalf("list: %q", l.Text)
	}
	r = c.Exec(map[string]any{"command": "true"})
	id = r.Str("sessionId")
	rm := c.Process(map[string]any{"action": "remove", "sessionId": id})
	if rm.Text != "Removed session "+id+" (approval withdrawn)." {
		t.Fatalf("withdraw: %q", rm.Text)
	}
	out, _ := e2etest.CLI(t, "approvals", "pending", "--home", home)
	if !strings.Contains(out, "No pending approvals.") {
		t.Fatalf("still pending after withdraw: %s", out)
	}
}

func TestGateUnreadableApprovalsFile(t *testing.T) {
	home := e2etest.GatedHome(t, `,"security":"full","ask":"off"`, `{"version":2}`)
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "true"})
	if !r.IsError || !strings.HasPrefix(r.Text, "exec denied: approvals file unreadable (") {
		t.Fatalf("unreadable file: %q", r.Text)
	}
}

func TestPolicyExplainCLI(t *testing.T) {
	echo := echoPath(t)
	home := e2etest.GatedHome(t, `,"security":"allowlist"`, `{"version":1,"agents":{"main":{"allowlist":[{"pattern":"`+echo+`"}]}}}`)
	out, code := e2etest.CLI(t, "policy", "explain", "--home", home, "--", "echo hi | head -n 1 && curl -s x")
	if code != 0 {
		t.Fatalf("explain: %d %s", code, out)
	}
	for _, want := range []string{"agent main · host gateway · security allowlist", "parse: ok", "✓ allowlist", "✓ safeBins", "✗ miss", "verdict: approval required"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, "gate: applies: agent main runs on host gateway (tools.exec.host)\n") {
		t.Errorf("explain does not say first that the gate applies:\n%s", out)
	}
	out, _ = e2etest.CLI(t, "policy", "explain", "--home", home, "--json", "--", "echo $(id)")
	var j map[string]any
	if err := json.Unmarshal([]byte(out), &j); err != nil || !strings.Contains(j["analysis"].(string), "unsupported shell construct") {
		t.Fatalf("explain json: %v %s", err, out)
	}
	// The defaults gate nothing: explain says so first, and the policy line
	// and the verdict are what the gate would use and decide, not what
	// happens.
	fresh := e2etest.NewHome(t, "")
	out, code = e2etest.CLI(t, "policy", "explain", "--home", fresh, "--", "rm -rf x")
	if code != 0 || !strings.HasPrefix(out, "gate: not applied: agent main has no configured host and sandboxing is off") ||
		strings.Contains(out, "\nverdict: ") || !strings.Contains(out, "\nverdict if the gate applied: approval required") ||
		!strings.Contains(out, "\nif the gate applied: agent main · host gateway · security allowlist") {
		t.Errorf("explain for an ungated agent: exit %d\n%s", code, out)
	}
	out, _ = e2etest.CLI(t, "policy", "explain", "--home", fresh, "--json", "--", "rm -rf x")
	var fj struct {
		Verdict string
		Gate    struct {
			Host             string
			Applies, Ungated bool
		}
	}
	if err := json.Unmarshal([]byte(out), &fj); err != nil || fj.Gate.Applies || !fj.Gate.Ungated || fj.Gate.Host != "gateway" || fj.Verdict != "prompt" {
		t.Errorf("explain --json for an ungated agent: %v %s", err, out)
	}
}

func TestAgentDefaultsCLI(t *testing.T) {
	home := e2etest.NewHome(t, "")
	out, code := e2etest.CLI(t, "agents", "defaults", "main", "host=gateway", "security=deny", "--home", home)
	if code != 0 || out != "Exec defaults set (host=gateway, security=deny).\n" {
		t.Fatalf("set: %d %q", code, out)
	}
	c := e2etest.StartConch(t, home)
	if r := c.Exec(map[string]any{"command": "true"}); r.Text != "exec denied: host=gateway security=deny" {
		t.Fatalf("exec with defaults: %q", r.Text)
	}
	out, _ = e2etest.CLI(t, "agents", "defaults", "main", "--home", home)
	if !strings.HasPrefix(out, "Current exec defaults: host=gateway, security=deny, ask=(unset), node=(unset).") {
		t.Fatalf("show: %q", out)
	}
	if out, code = e2etest.CLI(t, "agents", "defaults", "main", "host=mars", "--home", home); code != 2 || !strings.Contains(out, `Unrecognized exec host "mars"`) {
		t.Fatalf("bad host: %d %q", code, out)
	}
}

func TestScriptPreflight(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bad script.py"), []byte("import os\nprint('x')\ntoken = $API_TOKEN\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "good.py"), []byte("print('fine')\n"), 0o600)
	r := c.Exec(map[string]any{"command": `python3 -u "bad script.py"`, "workdir": dir})
	want := "exec preflight: detected likely shell variable injection ($API_TOKEN) in python script: bad script.py:3.\nIn Python, use os.environ.get(\"API_TOKEN\") instead of raw $API_TOKEN.\n(If this is inside a string literal on purpose, escape it or restructure the code.)"
	if !r.IsError || r.Text != want {
		t.Fatalf("preflight:\n got %q\nwant %q", r.Text, want)
	}
	if r := c.Exec(map[string]any{"command": "python3 good.py", "workdir": dir}); r.Text != "fine" {
		t.Fatalf("good script: %q", r.Text)
	}
	if r := c.Exec(map[string]any{"command": "python3 -c 'print(1)' bad.py", "workdir": dir}); r.IsError {
		t.Fatalf("-c must skip preflight: %q", r.Text)
	}
}

func TestDoctorCLI(t *testing.T) {
	home := e2etest.NewHome(t, `{"tools":{"exec":{"safeBins":["python3","cut"]}}}`)
	os.WriteFile(filepath.Join(home, "exec-approvals.json"), []byte(`{"version":1,"agents":{"main":{"allowlist":[{"pattern":"rg"}]}}}`), 0o644)
	out, code := e2etest.CLI(t, "doctor", "--home", home)
	if code != 1 {
		t.Fatalf("doctor exit %d:\n%s", code, out)
	}
	for _, id := range []string{"home.permissions", "approvals.bare_names", "exec.safe_bins_interpreter_unprofiled"} {
		if !strings.Contains(out, id+":") {
			t.Errorf("doctor lacks %s:\n%s", id, out)
		}
	}
	// An agent whose commands nothing judges is a warning, whichever way
	// it came about: the defaults, or host=gateway with full/off.
	for _, cfg := range []string{"", `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`} {
		h := e2etest.NewHome(t, cfg)
		if out, code := e2etest.CLI(t, "doctor", "--home", h); code != 1 || !strings.Contains(out, "warn  exec.ungated: commands of agent main are not gated: ") {
			t.Errorf("doctor on %q: exit %d, no exec.ungated warning:\n%s", cfg, code, out)
		}
	}
	// Gated: the built-in default runs commands ungated, which doctor warns
	// about when it runs as root.
	clean := e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway"}}}`)
	if out, code := e2etest.CLI(t, "doctor", "--home", clean); code != 0 || strings.Contains(out, "exec.ungated") {
		t.Fatalf("clean home: %d %s", code, out)
	}
}

// The approval timeout is at least 10 s (approvals.timeoutMs clamp), so
// this test is slow on purpose: askFallback=full runs the command.
func TestGateTimeoutFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 10 s approval timeout")
	}
	t.Parallel() // it mostly waits
	home := e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","ask":"always","askFallback":"full"}},"approvals":{"timeoutMs":10000}}`)
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "echo ran-after-timeout"})
	id := r.Str("sessionId")
	p := c.WaitEnd(id, 30*time.Second)
	l := c.Process(map[string]any{"action": "log", "sessionId": id})
	if p.Num("exitCode") != 0 || l.Text != "ran-after-timeout" {
		t.Fatalf("fallback run: %q log %q", p.Text, l.Text)
	}
	c.Close()
	out, _ := e2etest.CLI(t, "ledger", "tail", "--home", home, "--session", id)
	if !strings.Contains(out, "decision") || !strings.Contains(out, " end ") {
		t.Fatalf("ledger for the session:\n%s", out)
	}
}

func TestApprovedPlanChanged(t *testing.T) {
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"on-miss"`, "")
	c := e2etest.StartConch(t, home)
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	os.WriteFile(script, []byte("echo original\n"), 0o600)
	r := c.Exec(map[string]any{"command": "sh job.sh", "workdir": dir})
	if r.Str("status") != "approval-pending" {
		t.Fatalf("want approval-pending: %q", r.Text)
	}
	// The script is swapped after the request and before the decision.
	os.WriteFile(script, []byte("echo swapped\n"), 0o600)
	if out, code := e2etest.CLI(t, "approvals", "approve", r.Str("approvalSlug"), "--home", home); code != 0 {
		t.Fatalf("approve: %s", out)
	}
	p := c.WaitEnd(r.Str("sessionId"), 10*time.Second)
	if p.Text != "(no new output)\n\nNot run: exec denied (approval plan changed before execution)." {
		t.Fatalf("changed plan ran: %q", p.Text)
	}
}

func TestApprovalsFileCLI(t *testing.T) {
	home := e2etest.NewHome(t, "")
	out, code := e2etest.CLI(t, "approvals", "get", "--home", home)
	var got struct {
		Exists bool   `json:"exists"`
		Hash   string `json:"hash"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Exists {
		t.Fatalf("get: %d %s", code, out)
	}
	f := filepath.Join(t.TempDir(), "a.json")
	os.WriteFile(f, []byte(`{"version":1,"socket":{"path":"/x"},"agents":{"main":{"allowlist":[{"pattern":"/usr/bin/git"}]}}}`), 0o600)
	if out, code := e2etest.CLI(t, "approvals", "set", f, "--base-hash", "deadbeef", "--home", home); code != 5 || !strings.Contains(out, "exec approvals changed; reload and retry") {
		t.Fatalf("stale base hash: %d %s", code, out)
	}
	if out, code := e2etest.CLI(t, "approvals", "set", f, "--base-hash", got.Hash, "--home", home); code != 0 {
		t.Fatalf("set: %d %s", code, out)
	}
	fi, _ := os.Stat(filepath.Join(home, "exec-approvals.json"))
	b, _ := os.ReadFile(filepath.Join(home, "exec-approvals.json"))
	if fi.Mode().Perm() != 0o600 || !strings.Contains(string(b), `"socket"`) || !strings.Contains(string(b), "/usr/bin/git") {
		t.Fatalf("file after set (%v):\n%s", fi.Mode(), b)
	}
	src := filepath.Join(t.TempDir(), "openclaw.json")
	os.WriteFile(src, []byte(`{"version":1,"agents":{"main":{"allowlist":[{"pattern":"/usr/bin/rg"},{"pattern":"/usr/bin/GIT"}]}}}`), 0o600)
	if out, code := e2etest.CLI(t, "approvals", "import", src, "--home", home); code != 0 || !strings.Contains(out, "1 allowlist entries added") {
		t.Fatalf("import: %d %s", code, out)
	}
}

func TestApprovalByElicitation(t *testing.T) {
	home := e2etest.GatedHome(t, `,"ask":"always"`, "")
	for _, tc := range []struct {
		answer *mcp.ElicitResult
		want   string
		isErr  bool
	}{
		{&mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow-once"}}, "elicited-ok", false},
		{&mcp.ElicitResult{Action: "decline"}, "exec denied: user denied", true},
		{&mcp.ElicitResult{Action: "cancel"}, "Approval required (id ", false},
	} {
		var asked string
		client := mcp.NewClient(&mcp.Implementation{Name: "elicit-test", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = req.Params.Message
				return tc.answer, nil
			},
		})
		cmd := exec.Command(e2etest.ConchBin, "mcp", "--home", home)
		_, stderrFile := e2etest.NewLog(t, "conch mcp")
		cmd.Stderr = stderrFile
		cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo elicited-ok"}})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !strings.HasPrefix(text, tc.want) || res.IsError != tc.isErr {
			t.Errorf("answer %s: %q (isError %v)", tc.answer.Action, text, res.IsError)
		}
		if !strings.HasPrefix(asked, "Approve command for agent main on gateway?\nCommand: echo elicited-ok\nDirectory: ") {
			t.Errorf("elicitation message: %q", asked)
		}
		cs.Close()
	}
}

// TestDoctorFix: --fix tightens the home's permissions and scaffolds empty
// profiles for plain safe bins, in the section that lists them; it leaves
// what is not safe to guess (interpreters, bare allowlist names).
func TestDoctorFix(t *testing.T) {
	home := e2etest.NewHome(t, `{"tools":{"exec":{"safeBins":["python3","cut","nl"]}},"agents":{"ops":{"tools":{"exec":{"safeBins":["paste"]}}}}}`)
	os.WriteFile(filepath.Join(home, "exec-approvals.json"), []byte(`{"version":1,"agents":{"main":{"allowlist":[{"pattern":"rg"}]}}}`), 0o644)
	os.Chmod(home, 0o755)
	out, _ := e2etest.CLI(t, "doctor", "--home", home)
	for _, want := range []string{`safe bin "nl" has no profile`, `safe bin "paste" has no profile`, "home.permissions"} {
		if !strings.Contains(out, want) {
			t.Fatalf("before --fix, doctor lacks %q:\n%s", want, out)
		}
	}
	out, code := e2etest.CLI(t, "doctor", "--fix", "--home", home)
	if code != 1 { // python3 and the bare name remain
		t.Fatalf("doctor --fix exit %d:\n%s", code, out)
	}
	for _, gone := range []string{`"nl" has no profile`, `"paste" has no profile`, "error home.permissions"} {
		if strings.Contains(out, gone) {
			t.Errorf("after --fix still %q:\n%s", gone, out)
		}
	}
	for _, kept := range []string{"exec.safe_bins_interpreter_unprofiled", "approvals.bare_names", "fixed exec.safe_bins_unprofiled: agents.ops.tools.exec.safeBinProfiles.paste = {}"} {
		if !strings.Contains(out, kept) {
			t.Errorf("doctor --fix lacks %q:\n%s", kept, out)
		}
	}
	if fi, _ := os.Stat(filepath.Join(home, "exec-approvals.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("approvals file mode %o", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(home); fi.Mode().Perm() != 0o700 {
		t.Errorf("home mode %o", fi.Mode().Perm())
	}
	// The rewritten config still holds everything and still runs.
	b, _ := os.ReadFile(filepath.Join(home, "config.json"))
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil || !strings.Contains(string(b), `"python3"`) || !strings.Contains(string(b), `"nl": {}`) {
		t.Fatalf("config after --fix: %v\n%s", err, b)
	}
	if out, code := e2etest.CLI(t, "doctor", "--fix", "--home", home); code != 1 || strings.Contains(out, "fixed ") {
		t.Fatalf("a second --fix changed something: %d\n%s", code, out)
	}
}

// TestApprovedSymlinkRetargeted: an approved command runs as written, so
// its words are resolved again before the run. The executable word and
// the script operand are symlinks the agent retargets after the request;
// the approved realpaths are unchanged (their hashes match), but what the
// words name now is another file. Generated over the forms: the symlink as
// the command, through a dispatch wrapper, as the script of sh and of an
// interpreter.
func TestApprovedSymlinkRetargeted(t *testing.T) {
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"on-miss"`, "")
	c := e2etest.StartConch(t, home)
	dir := t.TempDir()
	ran := filepath.Join(dir, "RAN")
	write := func(p, body string) {
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "good"), "#!/bin/sh\necho good\n")
	write(filepath.Join(dir, "evil"), "#!/bin/sh\ntouch '"+ran+"'\n")
	write(filepath.Join(dir, "good.sh"), "echo good\n")
	write(filepath.Join(dir, "evil.sh"), "touch '"+ran+"'\n")
	link := func(name, target string) {
		os.Remove(filepath.Join(dir, name))
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ cmd, name, good, evil string }{
		{"./x", "x", "good", "evil"},
		{"nice ./x", "x", "good", "evil"},
		{"./x; ./x", "x", "good", "evil"},
		{"sh s.sh", "s.sh", "good.sh", "evil.sh"},
		{"bash ./s.sh arg", "s.sh", "good.sh", "evil.sh"},
	} {
		link(tc.name, filepath.Join(dir, tc.good))
		r := c.Exec(map[string]any{"command": tc.cmd, "workdir": dir})
		if r.Str("status") != "approval-pending" {
			t.Fatalf("%q: want approval-pending: %q", tc.cmd, r.Text)
		}
		link(tc.name, filepath.Join(dir, tc.evil))
		if out, code := e2etest.CLI(t, "approvals", "approve", r.Str("approvalSlug"), "--home", home); code != 0 {
			t.Fatalf("approve: %s", out)
		}
		p := c.WaitEnd(r.Str("sessionId"), 20*time.Second)
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("%q: the retargeted symlink's file ran: %q", tc.cmd, p.Text)
		}
		if !strings.Contains(p.Text, "approval plan changed before execution") {
			t.Errorf("%q: %q", tc.cmd, p.Text)
		}
	}
	// Unchanged, it runs.
	link("x", filepath.Join(dir, "good"))
	r := c.Exec(map[string]any{"command": "./x", "workdir": dir})
	if out, code := e2etest.CLI(t, "approvals", "approve", r.Str("approvalSlug"), "--home", home); code != 0 {
		t.Fatalf("approve: %s", out)
	}
	if p := c.WaitEnd(r.Str("sessionId"), 20*time.Second); !strings.Contains(p.Text, "good") {
		t.Fatalf("unchanged: %q", p.Text)
	}
}

// TestGateTimeoutFallbackPinned: with askFallback allowlist, a command the
// allowlist satisfies runs after the approval timeout as an auto-allowed
// one does, pinned. It ran as written: `echo a<CR>#; touch RAN` was one
// echo to the parser (a carriage return was a blank, "#" a comment) and
// two commands to bash, which ran touch; and `echo 'a\nb'` ran dash's
// builtin echo, not the allowlisted /usr/bin/echo.
func TestGateTimeoutFallbackPinned(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 10 s approval timeout")
	}
	t.Parallel() // it mostly waits
	sh, err := exec.LookPath("dash")
	if err != nil {
		t.Skip("dash is not installed")
	}
	echo := echoPath(t)
	home := e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","security":"allowlist","ask":"always","askFallback":"allowlist"}},"approvals":{"timeoutMs":10000}}`)
	if err := os.WriteFile(filepath.Join(home, "exec-approvals.json"), []byte(`{"version":1,"defaults":{"askFallback":"allowlist"},"agents":{"main":{"askFallback":"allowlist","allowlist":[{"pattern":"`+echo+`"}]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := e2etest.StartConchEnv(t, home, []string{"SHELL=" + sh})
	dir := t.TempDir()
	ran := filepath.Join(dir, "RAN")
	cr := c.Exec(map[string]any{"command": "echo a\r#; touch " + ran, "workdir": dir})
	lit := c.Exec(map[string]any{"command": `echo 'a\nb'`, "workdir": dir})
	if cr.Str("status") != "approval-pending" || lit.Str("status") != "approval-pending" {
		t.Fatalf("want approval-pending: %q %q", cr.Text, lit.Text)
	}
	p := c.WaitEnd(cr.Str("sessionId"), 60*time.Second)
	if _, err := os.Stat(ran); err == nil {
		t.Fatalf("the carriage-return command ran touch: %q", p.Text)
	}
	if !strings.Contains(p.Text, "approval-timeout (allowlist-miss)") {
		t.Errorf("carriage return: %q", p.Text)
	}
	pl := c.WaitEnd(lit.Str("sessionId"), 60*time.Second)
	l := c.Process(map[string]any{"action": "log", "sessionId": lit.Str("sessionId")})
	if l.Text != `a\nb` {
		t.Fatalf("fallback run was not pinned to %s: %q log %q", echo, pl.Text, l.Text)
	}
}

// TestAllowAlwaysPersistsNoWildcard: allow-always of a file the agent
// named "*" persisted the pattern DIR/*, which allows every file of DIR.
// A path that is not its own exact pattern is not persisted; the approved
// command runs once.
func TestAllowAlwaysPersistsNoWildcard(t *testing.T) {
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"on-miss"`, "")
	c := e2etest.StartConch(t, home)
	dir := t.TempDir()
	for _, name := range []string{"*", "other"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho ran-"+name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := c.Exec(map[string]any{"command": "'./*'", "workdir": dir})
	if r.Str("status") != "approval-pending" {
		t.Fatalf("want approval-pending: %q", r.Text)
	}
	if out, code := e2etest.CLI(t, "approvals", "approve", r.Str("approvalSlug"), "--always", "--home", home); code != 0 {
		t.Fatalf("approve: %s", out)
	}
	c.WaitEnd(r.Str("sessionId"), 20*time.Second)
	b, _ := os.ReadFile(filepath.Join(home, "exec-approvals.json"))
	if strings.Contains(string(b), "*") {
		t.Fatalf("a wildcard was persisted:\n%s", b)
	}
	r = c.Exec(map[string]any{"command": "./other", "workdir": dir})
	if r.Str("status") != "approval-pending" {
		t.Fatalf("./other was not asked for: %q", r.Text)
	}
}
