package state

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestConfigRejectedAtLoad(t *testing.T) {
	for _, cfg := range []string{
		`{"tools":{"exec":{"host":"bogus"}}}`,
		`{"tools":{"exec":{"timeoutSec":"soon"}}}`,
		`{"tools":{"exec":{"unknownKnob":1}}}`,
		`{"agents":{"Bad Agent":{}}}`,
		`{"tools":{"deny":["rm"]}}`,
		`not json`,
	} {
		home := e2etest.NewHome(t, cfg)
		out, err := exec.Command(e2etest.ConchBin, "mcp", "--home", home).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "config") {
			t.Errorf("config %s accepted: %v %s", cfg, err, out)
		}
	}
	out, err := exec.Command(e2etest.ConchBin, "mcp", "--home", e2etest.NewHome(t, ""), "--agent", "Bad Agent!").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "invalid agent id") {
		t.Errorf("bad agent: %v %s", err, out)
	}
}

func TestToolsDeny(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"tools":{"deny":["process"]}}`))
	res, err := c.CS.ListTools(t.Context(), nil)
	if err != nil || len(res.Tools) != 1 || res.Tools[0].Name != "exec" {
		t.Fatalf("tools: %v %v", res, err)
	}
	start := time.Now()
	r := c.Exec(map[string]any{"command": "sleep 0.3; echo sync", "background": true})
	if r.Text != "Warning: background execution is disabled; running synchronously.\n\nsync" || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("synchronous run: %q", r.Text)
	}
	// The SDK itself refuses a tool that is not listed.
	if _, err := c.CS.CallTool(t.Context(), &mcp.CallToolParams{Name: "process", Arguments: map[string]any{"action": "list"}}); err == nil || !strings.Contains(err.Error(), `unknown tool "process"`) {
		t.Fatalf("denied tool answered: %v", err)
	}
}

func TestStreamFilteredPaging(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.02; done", "background": true})
	id := r.Str("sessionId")
	c.WaitEnd(id, 10*time.Second)
	var got []string
	since := 0.0
	for i := 0; i < 5; i++ {
		l := c.Process(map[string]any{"action": "log", "sessionId": id, "stream": "stdout", "since": since, "limit": 1})
		if l.Text == "(no output recorded)" {
			break
		}
		got = append(got, l.Text)
		since = l.Num("cursor")
	}
	if strings.Join(got, ",") != "out1,out2,out3" {
		t.Fatalf("paged stdout: %v", got)
	}
	e := c.Process(map[string]any{"action": "log", "sessionId": id, "stream": "stderr"})
	if e.Text != "err1\nerr2\nerr3" {
		t.Fatalf("stderr: %q", e.Text)
	}
	p := c.Process(map[string]any{"action": "poll", "sessionId": id, "since": 1e9})
	if p.Num("cursor") != 30 {
		t.Fatalf("since beyond the end: cursor %v, want the journal end 30", p.D["cursor"])
	}
}

func TestPollBackoff(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "echo x; sleep 912.1", "background": true})
	id := r.Str("sessionId")
	e2etest.Eventually(t, 5*time.Second, func() string {
		if l := c.Process(map[string]any{"action": "log", "sessionId": id}); l.Text != "x" {
			return "no output yet"
		}
		return ""
	})
	var got []float64
	for i := 0; i < 6; i++ {
		got = append(got, c.Process(map[string]any{"action": "poll", "sessionId": id}).Num("retryInMs"))
	}
	want := []float64{5000, 5000, 10000, 30000, 60000, 60000}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("retryInMs = %v, want %v", got, want)
		}
	}
	c.Process(map[string]any{"action": "kill", "sessionId": id})
}

func TestExecRateLimitAndRunningQuota(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"quotas":{"execPerSecond":1,"execBurst":2,"maxRunning":1}}`))
	if r := c.Exec(map[string]any{"command": "sleep 915.1", "background": true}); r.Str("status") != "running" {
		t.Fatalf("first: %q", r.Text)
	}
	r := c.Exec(map[string]any{"command": "true"})
	errObj, _ := r.D["error"].(map[string]any)
	if !r.IsError || errObj["code"] != "quota_exceeded" || !strings.HasPrefix(r.Text, "quota exceeded: agent main already has 1 running sessions (quotas.maxRunning)") {
		t.Fatalf("maxRunning: %q %v", r.Text, r.D)
	}
	r = c.Exec(map[string]any{"command": "true"})
	errObj, _ = r.D["error"].(map[string]any)
	if !r.IsError || errObj["code"] != "rate_limited" || !strings.HasPrefix(r.Text, "rate limit exceeded: agent main may start 1 exec calls per second (quotas.execPerSecond); retry in ") {
		t.Fatalf("rate limit: %q %v", r.Text, r.D)
	}
	c.Process(map[string]any{"action": "kill", "sessionId": c.Process(map[string]any{"action": "list"}).D["sessions"].([]any)[0].(map[string]any)["sessionId"]})
}

func TestIdempotencyKey(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	f := t.TempDir() + "/runs"
	cmd := "sleep 0.4; echo run >> " + f + "; echo done"
	var wg sync.WaitGroup
	results := make([]e2etest.Result, 2)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = c.Exec(map[string]any{"command": cmd, "idempotencyKey": "job-1"})
		}(i)
	}
	wg.Wait()
	if results[0].Text != "done" || results[1].Text != "done" {
		t.Fatalf("joined results: %q / %q", results[0].Text, results[1].Text)
	}
	again := c.Exec(map[string]any{"command": cmd, "idempotencyKey": "job-1"})
	if again.Text != "done" {
		t.Fatalf("replay: %q", again.Text)
	}
	if b, _ := os.ReadFile(f); string(b) != "run\n" {
		t.Fatalf("the command ran %q", b)
	}
	conflict := c.Exec(map[string]any{"command": "echo other", "idempotencyKey": "job-1"})
	if !conflict.IsError || conflict.Text != `idempotencyKey "job-1" was already used for a different request.` {
		t.Fatalf("conflict: %q", conflict.Text)
	}
	bg := c.Exec(map[string]any{"command": "sleep 919.1", "background": true, "idempotencyKey": "bg-1"})
	bg2 := c.Exec(map[string]any{"command": "sleep 919.1", "background": true, "idempotencyKey": "bg-1"})
	if bg2.Str("status") != "running" || bg2.Str("sessionId") != bg.Str("sessionId") {
		t.Fatalf("background replay: %v vs %v", bg2.D, bg.D)
	}
	e2etest.Eventually(t, 5*time.Second, func() string {
		if n := len(e2etest.PgrepHome("^sleep 919.1", c.Home)); n != 1 {
			return fmt.Sprintf("%d processes for one key", n)
		}
		return ""
	})
	c.Process(map[string]any{"action": "kill", "sessionId": bg.Str("sessionId")})
}

func TestMaxRetainedEviction(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"quotas":{"maxRunning":2,"maxRetained":2}}`))
	var ids []string
	for i := 0; i < 3; i++ {
		r := c.Exec(map[string]any{"command": "echo " + strconv.Itoa(i), "background": true})
		ids = append(ids, r.Str("sessionId"))
		c.WaitEnd(r.Str("sessionId"), 10*time.Second)
	}
	e2etest.Eventually(t, 5*time.Second, func() string {
		l := c.Process(map[string]any{"action": "list"})
		if strings.Contains(l.Text, ids[0]) {
			return "oldest still listed: " + l.Text
		}
		return ""
	})
	r := c.RawCall("process", map[string]any{"action": "list"})
	all := r.Text + strings.Join(c.Events, "\n")
	if !strings.Contains(all, "Exec session "+ids[0]+" evicted (quotas.maxRetained)") {
		t.Fatalf("no eviction notice: %q %v", r.Text, c.Events)
	}
}

// TestJournalQuotaTrimsRunning: with only a running session over
// quotas.journalBytes, its journal is trimmed to head + newest tail while
// it runs, the agent is told once, and log still shows both ends.
func TestJournalQuotaTrimsRunning(t *testing.T) {
	home := e2etest.NewHome(t, `{"quotas":{"journalBytes":8388608}}`)
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "yes 0123456789abcdef | head -c 40000000; echo; echo END-OF-FLOOD; sleep 924.1", "background": true})
	id := r.Str("sessionId")
	jdir := filepath.Join(home, "sessions", id) // the journal's segments are in the session dir
	e2etest.Eventually(t, 60*time.Second, func() string {
		l := c.Process(map[string]any{"action": "log", "sessionId": id, "limit": 5})
		if !strings.Contains(l.Text, "END-OF-FLOOD") {
			return "flood not done"
		}
		return ""
	})
	e2etest.Eventually(t, 10*time.Second, func() string {
		var size int64
		ents, _ := os.ReadDir(jdir)
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".seg") {
				size += fi.Size()
			}
		}
		if size > 8<<20+8<<20/50 {
			return fmt.Sprintf("journal is %d bytes, quota 8 MiB", size)
		}
		return ""
	})
	head := c.Process(map[string]any{"action": "log", "sessionId": id, "offset": 0, "limit": 2})
	if !strings.HasPrefix(head.Text, "0123456789abcdef") {
		t.Fatalf("the head is gone: %.200q", head.Text)
	}
	if s := c.Process(map[string]any{"action": "poll", "sessionId": id}); s.Str("status") != "running" {
		t.Fatalf("the session stopped: %v", s.D)
	}
	r = c.RawCall("process", map[string]any{"action": "list"})
	all := r.Text + strings.Join(c.Events, "\n")
	want := "Exec session " + id + " evicted (journal trimmed to head + tail (quotas.journalBytes))"
	if strings.Count(all, want) != 1 {
		t.Fatalf("want one notice %q, got %q / %v", want, r.Text, c.Events)
	}
	c.Process(map[string]any{"action": "kill", "sessionId": id})
}

// TestInvalidConfigExitCode: every command that stops on an invalid
// config.json exits 78, whatever the command and whatever the fault.
// Every command of `conch help` runs on a home with the first fault and
// with one more fault in turn; a command that says "config:" on stderr
// must exit 78, and those that need the configuration must say it.
func TestInvalidConfigExitCode(t *testing.T) {
	faults := []string{
		`{"tools":{"exec":{"unknownKnob":1}}}`,
		`{"tools":{"exec":{"host":"bogus"}}}`,
		`{"agents":{"Bad Agent":{}}}`,
		`{"tools":{"deny":["rm"]}}`,
		`{} {}`,
		`not json`,
	}
	// One invocation per command ("H" is the home); needs: it must report
	// the configuration.
	type inv struct {
		args  []string
		needs bool
	}
	cmds := map[string]inv{
		"serve":       {[]string{"serve", "--home", "H", "--listen", "127.0.0.1:0"}, true},
		"mcp":         {[]string{"mcp", "--home", "H"}, true},
		"node":        {[]string{"node", "--home", "H", "--gateway", "http://127.0.0.1:9", "--token", "cnj_x"}, true},
		"exec":        {[]string{"exec", "--home", "H", "--", "true"}, true},
		"ps":          {[]string{"ps", "--home", "H"}, true},
		"poll":        {[]string{"poll", "--home", "H", "some-id"}, true},
		"log":         {[]string{"log", "--home", "H", "some-id"}, true},
		"wait":        {[]string{"wait", "--home", "H", "some-id"}, true},
		"search":      {[]string{"search", "--home", "H", "some-id", "x"}, true},
		"screen":      {[]string{"screen", "--home", "H", "some-id"}, true},
		"send":        {[]string{"send", "--home", "H", "some-id", "--data", "x"}, true},
		"kill":        {[]string{"kill", "--home", "H", "some-id"}, true},
		"clear":       {[]string{"clear", "--home", "H", "some-id"}, true},
		"rm":          {[]string{"rm", "--home", "H", "some-id"}, true},
		"apply-patch": {[]string{"apply-patch", "--home", "H"}, true},
		"policy":      {[]string{"policy", "explain", "--home", "H", "--", "ls"}, true},
		"sandbox":     {[]string{"sandbox", "status", "--home", "H"}, true},
		"agents":      {[]string{"agents", "list", "--home", "H"}, false},
		"approvals":   {[]string{"approvals", "pending", "--home", "H"}, false},
		"doctor":      {[]string{"doctor", "--home", "H"}, false}, // reports it as a finding (exit 1)
		"ledger":      {[]string{"ledger", "verify", "--home", "H"}, false},
		"nodes":       {[]string{"nodes", "list", "--home", "H"}, false},
		"ui":          {[]string{"ui", "--home", "H"}, false},
		"version":     {[]string{"version"}, false},
		"config":      {[]string{"config", "schema"}, false}, // reads no configuration
		"help":        {[]string{"help", "exec"}, false},
		"completion":  {[]string{"completion", "bash"}, false},
	}
	// `conch help` lists the commands as "  NAME   summary" under its
	// group headings.
	help, _, _ := e2etest.RunCLI(t, nil, "help")
	listed := 0
	section := ""
	for _, line := range strings.Split(help, "\n") {
		if line != "" && !strings.HasPrefix(line, " ") {
			section = line
			continue
		}
		if section == "Examples:" || section == "Usage:" || section == "Flags:" || section == "Global Flags:" {
			continue
		}
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || f[0] == "conch" || strings.HasPrefix(f[0], "-") {
			continue
		}
		listed++
		if _, ok := cmds[f[0]]; !ok {
			t.Errorf("command %q of `conch help` is not covered by this test", f[0])
		}
	}
	if listed < len(cmds)-1 {
		t.Errorf("`conch help` lists %d commands, the test knows %d:\n%s", listed, len(cmds), help)
	}
	homes := make([]string, len(faults))
	for i, f := range faults {
		homes[i] = e2etest.NewHome(t, f)
	}
	i := 0
	for name, c := range cmds {
		i++
		for _, fi := range []int{0, 1 + i%(len(faults)-1)} {
			args := make([]string, len(c.args))
			for j, a := range c.args {
				if a == "H" {
					a = homes[fi]
				}
				args[j] = a
			}
			_, stderr, code := e2etest.RunCLI(t, nil, args...)
			says := strings.Contains(stderr, "config:")
			switch {
			case says && code != e2etest.ExitConfig:
				t.Errorf("conch %s with config %s: exit %d, want %d: %s", name, faults[fi], code, e2etest.ExitConfig, stderr)
			case c.needs && !says:
				t.Errorf("conch %s with config %s: no config error (exit %d): %s", name, faults[fi], code, stderr)
			}
		}
	}
}
