package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
)

// TestGatewayPlanEnv: a gateway run's environment is the one EnvSpec
// builds from the daemon's: what the daemon holds that a command must
// not inherit (CONCH_* secrets, dangerous keys) is gone, the request's
// overrides win over the non-interactive defaults, pathPrepend comes
// before the login PATH, which comes before the daemon's, and a PTY gets
// TERM; a "~/" workdir is the user's home's.
func TestGatewayPlanEnv(t *testing.T) {
	home := t.TempDir()
	os.Mkdir(filepath.Join(home, "proj"), 0o755)
	t.Setenv("HOME", home)
	t.Setenv("CONCH_OPERATOR_TOKEN", "cop_secret")
	t.Setenv("NODE_OPTIONS", "--require=/tmp/evil.js")
	t.Setenv("LD_PRELOAD", "")
	t.Setenv("TERM", "")
	g := &gateway{d: Deps{LoginPATH: func(time.Duration) (string, bool, time.Duration) { return "/login/bin:/usr/bin", true, 0 }}}
	pl := &Plan{PTY: true, Set: config.ExecSettings{NonInteractiveEnv: map[string]string{"MYVAR": "default", "CI": "1"}, PathPrepend: []string{"/pre/bin"}}}
	req := Request{Params: apitype.ExecParams{Command: "env", Workdir: "~/proj", Env: map[string]string{"MYVAR": "mine"}}, Workspace: home}
	if err := g.Plan(context.Background(), req, pl); err != nil {
		t.Fatal(err)
	}
	env := envMap(pl.Env)
	for _, k := range []string{"CONCH_OPERATOR_TOKEN", "NODE_OPTIONS", "LD_PRELOAD"} {
		if v, ok := env[k]; ok {
			t.Errorf("the daemon's %s=%q reached the plan", k, v)
		}
	}
	if env["MYVAR"] != "mine" || env["CI"] != "1" || env["CONCH_SHELL"] != "exec" || env["TERM"] != "xterm-256color" {
		t.Errorf("layers: MYVAR=%q CI=%q CONCH_SHELL=%q TERM=%q", env["MYVAR"], env["CI"], env["CONCH_SHELL"], env["TERM"])
	}
	if p := env["PATH"]; !strings.HasPrefix(p, "/pre/bin:/login/bin:/usr/bin") {
		t.Errorf("PATH %q, want pathPrepend, then the login PATH", p)
	}
	if pl.Cwd != filepath.Join(home, "proj") {
		t.Errorf("cwd %q, want ~/proj expanded", pl.Cwd)
	}
	if pl.EnvHash != EnvHash(req.Params.Env) || len(pl.EnvKeys) != 1 || pl.EnvKeys[0] != "MYVAR" {
		t.Errorf("env binding: %s %q", pl.EnvHash, pl.EnvKeys)
	}
}
