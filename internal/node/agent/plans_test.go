package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/host"
)

// TestPlansSingleUse: a prepared plan runs once, an expired one never,
// and storing a plan drops the expired ones.
func TestPlansSingleUse(t *testing.T) {
	var ps plans
	ps.put(&plan{plan: apitype.NodePlan{PlanID: "a"}, expireAt: time.Now().Add(time.Hour)})
	ps.put(&plan{plan: apitype.NodePlan{PlanID: "old"}, expireAt: time.Now().Add(-time.Second)})
	if ps.take("old") != nil {
		t.Fatal("an expired plan was usable")
	}
	if ps.take("a") == nil {
		t.Fatal("a fresh plan was not usable")
	}
	if ps.take("a") != nil {
		t.Fatal("a plan was usable twice")
	}
	if ps.take("never") != nil {
		t.Fatal("an unknown plan was usable")
	}
	ps.put(&plan{plan: apitype.NodePlan{PlanID: "b"}, expireAt: time.Now().Add(time.Hour)})
	if _, ok := ps.m["old"]; ok {
		t.Fatal("put kept an expired plan")
	}
}

// TestCheckPlan generates one run per way it can differ from its plan
// (and the files the plan pinned changing) and requires each refused
// with its reason; the run as planned passes.
func TestCheckPlan(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	script := filepath.Join(dir, "script.sh")
	for _, f := range []string{exe, script} {
		if err := os.WriteFile(f, []byte("v1"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dev, ino, ok := fsutil.Identity(dir)
	if !ok {
		t.Fatal("no identity for the test directory")
	}
	env := map[string]string{"A": "1"}
	newPlan := func() *plan {
		return &plan{plan: apitype.NodePlan{
			Argv: []string{"sh", "-c", "tool"}, RawCommand: "tool", Cwd: dir, CwdIdentity: [2]uint64{dev, ino},
			EnvHash: host.EnvHash(env), AgentID: "main",
			Exes:   []apitype.NodePlanExe{{Path: exe, SHA256: fsutil.HashFile(exe)}},
			Script: &apitype.NodePlanExe{Path: script, SHA256: fsutil.HashFile(script)},
		}, recheck: func() (bool, bool) { return true, true }}
	}
	run := func() apitype.NodeRunParams {
		var p apitype.NodeRunParams
		p.Command, p.RawCommand, p.Cwd, p.Env, p.AgentID = []string{"sh", "-c", "tool"}, "tool", dir, env, "main"
		return p
	}
	if e := checkPlan(newPlan(), run()); e != nil {
		t.Fatalf("the run as planned: %v", e)
	}
	cases := []struct {
		name   string
		change func(*plan, *apitype.NodeRunParams)
		want   string
	}{
		{"argv", func(_ *plan, p *apitype.NodeRunParams) { p.Command = []string{"sh", "-c", "other"} }, "execution plan mismatch"},
		{"rawCommand", func(_ *plan, p *apitype.NodeRunParams) { p.RawCommand = "other" }, "execution plan mismatch"},
		{"cwd", func(_ *plan, p *apitype.NodeRunParams) { p.Cwd = "/" }, "execution plan mismatch"},
		{"env", func(_ *plan, p *apitype.NodeRunParams) { p.Env = map[string]string{"A": "2"} }, "execution plan mismatch"},
		{"agent", func(_ *plan, p *apitype.NodeRunParams) { p.AgentID = "other" }, "execution plan mismatch"},
		{"unapproved", func(np *plan, _ *apitype.NodeRunParams) { np.verdict.RequiresApproval = true }, "approval required"},
		{"cwd identity", func(np *plan, _ *apitype.NodeRunParams) { np.plan.CwdIdentity[1]++ }, "approval cwd changed before execution"},
		{"script", func(np *plan, _ *apitype.NodeRunParams) { np.plan.Script.SHA256 = "x" }, "approval script operand changed before execution"},
		{"exe", func(np *plan, _ *apitype.NodeRunParams) { np.plan.Exes[0].SHA256 = "x" }, "approval executable changed before execution"},
		{"script re-resolved", func(np *plan, p *apitype.NodeRunParams) {
			p.Approved = true
			np.recheck = func() (bool, bool) { return false, true }
		}, "approval script operand changed before execution"},
		{"exe re-resolved", func(np *plan, p *apitype.NodeRunParams) {
			p.Approved = true
			np.recheck = func() (bool, bool) { return true, false }
		}, "approval executable changed before execution"},
	}
	for _, c := range cases {
		np, p := newPlan(), run()
		c.change(np, &p)
		e := checkPlan(np, p)
		if e == nil || e.Code != apitype.NodeRunDenied || e.Message != apitype.NodeRunDenied+": "+c.want {
			t.Errorf("%s: got %v, want %s", c.name, e, c.want)
		}
	}
	// A pinned run is not re-resolved: the pinned text runs.
	np, p := newPlan(), run()
	p.Approved, np.pinned = true, "tool"
	np.recheck = func() (bool, bool) { return false, false }
	if e := checkPlan(np, p); e != nil {
		t.Fatalf("a pinned approved run: %v", e)
	}
}
