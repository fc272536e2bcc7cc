package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Exec("main")
	if s.Yield != 10*time.Second || s.Timeout != 1800*time.Second || s.BackgroundTimeout != 0 || s.KillGrace != 3*time.Second ||
		s.Cleanup != 30*time.Minute || !s.NotifyOnExit || s.MaxOutputChars != 16000 || s.PendingMaxOutputChars != 16000 ||
		s.JournalMaxBytes != 64<<20 || s.JournalHeadBytes != 1<<20 || s.NonInteractiveEnv["PAGER"] != "cat" {
		t.Fatalf("defaults: %+v", s)
	}
	if !c.Survive() || !c.InlineEvents() || c.ApprovalTimeout() != 2*time.Minute {
		t.Fatal("section defaults")
	}
}

func TestClampsAndAgentOverride(t *testing.T) {
	c, err := Parse([]byte(`{"tools":{"exec":{"backgroundMs":5,"killGraceMs":999999,"cleanupMs":1,"maxOutputChars":10,"pendingMaxOutputChars":900000,"timeoutSec":0.25,"nonInteractiveEnv":{}}},
		"agents":{"build":{"tools":{"exec":{"backgroundMs":500000,"timeoutSec":-1,"security":"FULL"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Exec("main")
	if m.Yield != 10*time.Millisecond || m.KillGrace != time.Minute || m.Cleanup != time.Minute || m.MaxOutputChars != 1000 ||
		m.PendingMaxOutputChars != 1000 || m.Timeout != 250*time.Millisecond || len(m.NonInteractiveEnv) != 0 {
		t.Fatalf("clamps: %+v", m)
	}
	b := c.Exec("build")
	if b.Yield != 120*time.Second || b.Timeout != 0 || b.Security != "full" || b.KillGrace != time.Minute {
		t.Fatalf("agent override: %+v", b)
	}
}

func TestEnvFallback(t *testing.T) {
	t.Setenv("PI_BASH_YIELD_MS", "2500")
	t.Setenv("CONCH_MAX_OUTPUT_CHARS", "5000")
	c, _ := Parse([]byte(`{}`))
	if s := c.Exec("main"); s.Yield != 2500*time.Millisecond || s.MaxOutputChars != 5000 {
		t.Fatalf("env fallback: %+v", s)
	}
	c, _ = Parse([]byte(`{"tools":{"exec":{"backgroundMs":700}}}`))
	if s := c.Exec("main"); s.Yield != 700*time.Millisecond {
		t.Fatal("config must win over the environment")
	}
}

func TestStrict(t *testing.T) {
	for in, want := range map[string]string{
		`{"tools":{"exec":{"yieldMs":1}}}`:                        "unknown field",
		`{"tools":{"exec":{"host":"moon"}}}`:                      `tools.exec.host: invalid value "moon"`,
		`{"agents":{"x":{"tools":{"exec":{"ask":"sometimes"}}}}}`: `agents.x.tools.exec.ask`,
		`{"agents":{"Bad":{}}}`:                                   `invalid agent id "Bad"`,
		`{"ledger":{"scope":"most"}}`:                             `ledger.scope`,
		`{"ledger":{"forward":{"network":"pigeon"}}}`:             `ledger.forward.network: invalid value "pigeon"`,
		`{"ledger":{"forward":{"network":"tcp"}}}`:                `ledger.forward.address: network tcp needs host:port`,
		`{"ledger":{"forward":{"adress":"x"}}}`:                   "unknown field",
		`{} {}`:                                                   "trailing data",
		`{"tools":{"exec":{"node":"abcdef123456"}}}`:              `tools.exec.node: "abcdef123456" is an id prefix`,
		`{"agents":{"x":{"tools":{"exec":{"node":"cafe"}}}}}`:     `agents.x.tools.exec.node: invalid node name "cafe"`,
		`{"tools":{"exec":{"node":"name:BEEF"}}}`:                 `tools.exec.node: invalid node name "beef"`,
		`{"tools":{"exec":{"node":"id:abcdef"}}}`:                 `tools.exec.node: invalid node id`,
		`{"tools":{"exec":{"node":"!!"}}}`:                        `tools.exec.node: invalid node reference`,
	} {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want %q", in, err, want)
		}
	}
}

// TestNodeBindingForms: the node bindings a run can match are accepted.
func TestNodeBindingForms(t *testing.T) {
	for _, v := range []string{"build-1", "Build 1", "691827582ED53735090F1478", "id:691827582ed53735090f1478", "10.0.0.2", "::1", "ip:10.0.0.2", "name:web"} {
		if _, err := Parse([]byte(`{"tools":{"exec":{"node":"` + v + `"}}}`)); err != nil {
			t.Errorf("node %q: %v", v, err)
		}
	}
}

func TestApplyPatch(t *testing.T) {
	c, err := Parse([]byte(`{"tools":{"exec":{"applyPatch":{"enabled":true,"allowModels":["gpt-5"]}}},
		"agents":{"ro":{"tools":{"exec":{"applyPatch":{"workspaceOnly":false}}}},
		          "off":{"tools":{"exec":{"applyPatch":{"enabled":false}}}},
		          "noexec":{"tools":{"deny":["exec"]}},
		          "nopatch":{"tools":{"deny":["apply_patch"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.ApplyPatch("main"); !s.Enabled || !s.WorkspaceOnly || len(s.AllowModels) != 1 {
		t.Fatalf("main: %+v", s)
	}
	if s := c.ApplyPatch("ro"); !s.Enabled || s.WorkspaceOnly {
		t.Fatalf("agent override: %+v", s)
	}
	for agent, want := range map[string]bool{"main": true, "ro": true, "off": false, "noexec": false, "nopatch": false} {
		if got := c.ApplyPatchOffered(agent); got != want {
			t.Errorf("ApplyPatchOffered(%s) = %v", agent, got)
		}
	}
	d, _ := Parse([]byte(`{}`))
	if s := d.ApplyPatch("main"); s.Enabled || !s.WorkspaceOnly || d.ApplyPatchOffered("main") {
		t.Fatalf("defaults: %+v", s)
	}
	if _, err := Parse([]byte(`{"tools":{"exec":{"applyPatch":{"enable":true}}}}`)); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("unknown key: %v", err)
	}
}

// TestRetainedAtLeastRunning: a configuration that keeps fewer finished
// sessions than may run at once is rejected, globally and per agent.
func TestRetainedAtLeastRunning(t *testing.T) {
	for _, bad := range []string{
		`{"quotas":{"maxRunning":10,"maxRetained":5}}`,
		`{"quotas":{"maxRetained":100}}`,
		`{"agents":{"a":{"quotas":{"maxRunning":600}}}}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "maxRetained") {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
	for _, good := range []string{`{}`, `{"quotas":{"maxRunning":4,"maxRetained":4}}`, `{"quotas":{"maxRetained":0}}`, `{"quotas":{"maxRunning":0,"maxRetained":3}}`, `{"quotas":{"minRetainAgeMs":1000},"agents":{"a":{"quotas":{"minRetainAgeMs":0}}}}`} {
		if _, err := Parse([]byte(good)); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
}

func TestMinRetainAge(t *testing.T) {
	c, _ := Parse([]byte(`{}`))
	if q := c.Quota("a"); q.MinRetainAge != time.Hour || q.MaxRetained != 512 {
		t.Fatalf("defaults: %+v", q)
	}
	c, err := Parse([]byte(`{"quotas":{"minRetainAgeMs":1500},"agents":{"b":{"quotas":{"minRetainAgeMs":-5}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := c.Quota("a").MinRetainAge, c.Quota("b").MinRetainAge; a != 1500*time.Millisecond || b != 0 {
		t.Fatalf("minRetainAge a=%v b=%v", a, b)
	}
}
