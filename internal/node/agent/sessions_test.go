package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/node/agent"
	"github.com/conchsh/conch/internal/store/approvals"
)

// TestRunRefusesWhatCannotWork: options Run can never serve return at
// once with an error wrapping ErrFatal that names the fix, before any
// dial.
func TestRunRefusesWhatCannotWork(t *testing.T) {
	ctx := context.Background()
	paired := t.TempDir()
	os.MkdirAll(filepath.Join(paired, "node"), 0o700)
	os.WriteFile(filepath.Join(paired, "node", "node.json"), []byte(`{"gateway":"http://127.0.0.1:1","nodeToken":"cnt_x"}`), 0o600)
	badKey := t.TempDir()
	os.MkdirAll(filepath.Join(badKey, "node"), 0o700)
	os.WriteFile(filepath.Join(badKey, "node", "identity.key"), []byte("not a key"), 0o600)
	cases := []struct {
		name string
		opt  agent.Options
		want string
	}{
		{"no engine", agent.Options{Home: t.TempDir(), Gateway: "http://127.0.0.1:1", Token: "cnj_x"}, "needs Engine"},
		{"no gateway", withDeps(agent.Options{Home: t.TempDir(), Token: "cnj_x"}), "no gateway"},
		{"no token", withDeps(agent.Options{Home: t.TempDir(), Gateway: "http://127.0.0.1:1"}), "not paired yet"},
		{"another gateway", withDeps(agent.Options{Home: paired, Gateway: "http://127.0.0.1:2"}), "pass --token"},
		{"bad URL", withDeps(agent.Options{Home: t.TempDir(), Gateway: "ftp://x", Token: "cnj_x"}), "bad --gateway"},
		{"bad CA", withDeps(agent.Options{Home: t.TempDir(), Gateway: "https://127.0.0.1:1", Token: "cnj_x", CA: "/nonexistent/ca.pem"}), "--ca"},
		{"bad identity", withDeps(agent.Options{Home: badKey, Gateway: "http://127.0.0.1:1", Token: "cnj_x"}), "not PEM"},
	}
	for _, c := range cases {
		err := agent.Run(ctx, c.opt)
		if !errors.Is(err, agent.ErrFatal) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a fatal error saying %q", c.name, err, c.want)
		}
	}
}

// fakeless is never called: Run refuses the options above before it uses
// its engine.
type fakeless struct{ agent.Engine }

func withDeps(o agent.Options) agent.Options {
	o.Engine = fakeless{}
	o.ApplyPatch = func(context.Context, string, string, bool) apitype.Result { return apitype.Result{} }
	o.SetApprovals = func(string, *approvals.File, string, string) error { return nil }
	return o
}

// TestNodeSessionControl: the gateway reads a running session's output
// again from a cursor (a resync replaces the stream), and ends it through
// system.session.kill, whose end reaches it as exec.finished; a control
// request for a session the node does not have is answered with the
// supervisor's error.
func TestNodeSessionControl(t *testing.T) {
	ctx := testCtx(t)
	g := newGateway(t)
	g.start()
	startNode(t, g, `{"tools":{"exec":{"security":"full","ask":"off"}}}`)
	gc := g.conn(ctx)
	wd := t.TempDir()
	cmd := "echo first; sleep 1000"
	p := prepared(t, gc.call(t, ctx, "system.run.prepare", prepareParams(cmd, wd, nil, "full", "off")))
	if r := gc.call(t, ctx, "system.run", runParams(p, "s-ctl", nil, false)); !r.OK {
		t.Fatalf("run: %+v", r.Error)
	}
	var first apitype.NodeOutput
	select {
	case first = <-gc.output:
	case <-ctx.Done():
		t.Fatal("no output")
	}
	if string(first.Data) != "first\n" || first.Cursor <= 0 {
		t.Fatalf("first output %+v", first)
	}
	// Read again from 0: the same bytes arrive again.
	if r := gc.call(t, ctx, "system.session.read", apitype.NodeSessionParams{SessionID: "s-ctl"}); !r.OK {
		t.Fatalf("read: %+v", r.Error)
	}
	select {
	case o := <-gc.output:
		if string(o.Data) != "first\n" || o.SessionID != "s-ctl" {
			t.Fatalf("resync output %+v", o)
		}
	case <-ctx.Done():
		t.Fatal("no output after the resync")
	}
	wantError(t, "read of an unknown session", gc.call(t, ctx, "system.session.read", apitype.NodeSessionParams{SessionID: "s-none"}),
		apitype.NodeInvalidRequest, "No session found for s-none")
	r := gc.call(t, ctx, "system.session.status", apitype.NodeSessionParams{SessionID: "s-none", Request: mustJSON(map[string]any{})})
	if !r.OK || !strings.Contains(string(r.Payload), "No session found for s-none") {
		t.Fatalf("status of an unknown session: %+v %s", r.Error, r.Payload)
	}
	r = gc.call(t, ctx, "system.session.kill", apitype.NodeSessionParams{SessionID: "s-ctl", Request: mustJSON(map[string]any{"by": "agent"})})
	if !r.OK || strings.Contains(string(r.Payload), `"error"`) {
		t.Fatalf("kill: %+v %s", r.Error, r.Payload)
	}
	_, fin := gc.finished(t, ctx, "s-ctl")
	if fin.Success || fin.State == "" || fin.State == "running" {
		t.Fatalf("end after kill %+v", fin)
	}
}

// TestNodeAppliesPatchesInItsWorkspace: system.patch.apply writes in the
// node's workspace for the agent (its config, not the gateway's).
func TestNodeAppliesPatchesInItsWorkspace(t *testing.T) {
	ctx := testCtx(t)
	ws := t.TempDir()
	g := newGateway(t)
	g.start()
	startNode(t, g, `{"tools":{"exec":{"security":"full","ask":"off"}},"agents":{"main":{"workspace":"`+ws+`"}}}`)
	gc := g.conn(ctx)
	patch := "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"
	r := gc.call(t, ctx, "system.patch.apply", map[string]string{"agentId": "main", "input": patch})
	if !r.OK {
		t.Fatalf("patch: %+v", r.Error)
	}
	b, err := os.ReadFile(filepath.Join(ws, "hello.txt"))
	if err != nil || string(b) != "hello\n" {
		t.Fatalf("the patch did not land in the node's workspace %s: %q %v (%s)", ws, b, err, r.Payload)
	}
}
