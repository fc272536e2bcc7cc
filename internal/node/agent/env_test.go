package agent_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// hostenvData is internal/host/shellenv's data file: the lists the node's
// environment rules are made of.
func hostenvData(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../host/shellenv/shellenv.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for k, v := range raw {
		var l []string
		if json.Unmarshal(v, &l) == nil {
			out[k] = l
		}
	}
	return out
}

// TestNodeEnvRules: the environment of a node run is the node's own,
// never the gateway's. Overrides the node refuses (PATH in any letter
// case, every dangerous or override-only key and prefix of shellenv's
// data, a non-portable key, a file path in TZ, LANG or LC_*) are answered
// INVALID_REQUEST with the Security Violation and the command does not
// run; a plain override reaches the command; what the node's own process
// holds that a command must not inherit (CONCH_* secrets, dangerous keys)
// does not reach it.
func TestNodeEnvRules(t *testing.T) {
	ctx := testCtx(t)
	t.Setenv("CONCH_TEST_SECRET", "s3cret")
	t.Setenv("NODE_OPTIONS", "--require=/tmp/evil.js")
	t.Setenv("PYTHONPATH", "/tmp/evil")
	g := newGateway(t)
	g.start()
	startNode(t, g, `{"tools":{"exec":{"security":"full","ask":"off"}}}`)
	gc := g.conn(ctx)
	wd := t.TempDir()

	data := hostenvData(t)
	refused := []map[string]string{{"PATH": "/tmp/evil:/usr/bin"}, {"path": "/tmp/evil"}, {"Path": "/x"}, {"A-B": "1"}, {"1X": "1"},
		{"TZ": "/etc/shadow"}, {"LANG": "../../tmp/x"}}
	for _, k := range append(data["dangerousKeys"], data["overrideOnlyKeys"]...) {
		refused = append(refused, map[string]string{k: "x"})
	}
	for _, p := range append(data["dangerousPrefixes"], data["overrideOnlyPrefixes"]...) {
		refused = append(refused, map[string]string{p + "X": "x"})
	}
	for _, p := range data["pathValuePrefixes"] {
		refused = append(refused, map[string]string{p + "ALL": "/etc/passwd"})
	}
	if len(refused) < 25 {
		t.Fatalf("only %d refused overrides generated from %v", len(refused), data)
	}
	for i, env := range refused {
		marker := wd + "/ran"
		cmd := "touch " + marker
		p := prepared(t, gc.call(t, ctx, "system.run.prepare", prepareParams(cmd, wd, env, "full", "off")))
		r := gc.call(t, ctx, "system.run", runParams(p, "s-env-"+itoa(i), env, false))
		wantError(t, "env "+mustJSONString(env), r, "INVALID_REQUEST", "Security Violation")
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("env %v: the command ran", env)
		}
	}

	env := map[string]string{"FOO": "bar baz", "LANG": "C.UTF-8"}
	p := prepared(t, gc.call(t, ctx, "system.run.prepare", prepareParams("env", wd, env, "full", "off")))
	if r := gc.call(t, ctx, "system.run", runParams(p, "s-env-ok", env, false)); !r.OK {
		t.Fatalf("a plain override refused: %+v", r.Error)
	}
	out, fin := gc.finished(t, ctx, "s-env-ok")
	if !fin.Success {
		t.Fatalf("env: %+v\n%s", fin, out)
	}
	lines := strings.Split(out, "\n")
	has := func(kv string) bool {
		for _, l := range lines {
			if l == kv {
				return true
			}
		}
		return false
	}
	for _, want := range []string{"FOO=bar baz", "LANG=C.UTF-8", "CONCH_SHELL=exec"} {
		if !has(want) {
			t.Errorf("the command's environment lacks %s:\n%s", want, out)
		}
	}
	for _, bad := range []string{"CONCH_TEST_SECRET=", "NODE_OPTIONS=", "PYTHONPATH="} {
		if strings.Contains(out, bad) {
			t.Errorf("the node's %s reached the command:\n%s", bad, out)
		}
	}
	// A changed override after the prepare is another plan.
	p = prepared(t, gc.call(t, ctx, "system.run.prepare", prepareParams("env", wd, env, "full", "off")))
	wantError(t, "an override changed after the prepare", gc.call(t, ctx, "system.run", runParams(p, "s-env-changed", map[string]string{"FOO": "other"}, false)),
		"SYSTEM_RUN_DENIED", "execution plan mismatch")
}

func mustJSONString(v any) string { return string(mustJSON(v)) }

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
