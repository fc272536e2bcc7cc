package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
)

// TestGateStatusMatchesPlan generates agent configurations (the host from
// each place it can be set, sandboxing on and off, a policy that lets
// everything through) and checks that the gate status `policy explain`
// prints and `doctor` warns from says what exec's plan does with a call
// that names no host: where it runs, and whether the gate judges it.
func TestGateStatusMatchesPlan(t *testing.T) {
	type placed struct{ where, host string }
	var hosts []placed
	hosts = append(hosts, placed{"", ""})
	for _, where := range []string{"tools", "agent", "defaults"} {
		for _, h := range []string{"gateway", "sandbox", "node"} {
			hosts = append(hosts, placed{where, h})
		}
	}
	n := 0
	for _, hp := range hosts {
		for _, mode := range []string{"off", "all"} {
			for _, fullOff := range []bool{false, true} {
				name := fmt.Sprintf("%s-%s_sandbox-%s_fulloff-%v", hp.where, hp.host, mode, fullOff)
				t.Run(name, func(t *testing.T) {
					home := t.TempDir()
					seedLoginCache(home)
					exec := map[string]any{}
					if fullOff {
						exec["security"], exec["ask"] = "full", "off"
					}
					cfg := map[string]any{"sandbox": map[string]any{"mode": mode}}
					switch hp.where {
					case "tools":
						exec["host"] = hp.host
					case "agent":
						cfg["agents"] = map[string]any{"main": map[string]any{"tools": map[string]any{"exec": map[string]any{"host": hp.host}}}}
					case "defaults":
						if err := SaveExecDefaults(home, "main", apitype.ExecDefaults{Host: hp.host}, false); err != nil {
							t.Fatal(err)
						}
					}
					cfg["tools"] = map[string]any{"exec": exec}
					b, _ := json.Marshal(cfg)
					path := filepath.Join(home, "config.json")
					if err := os.WriteFile(path, b, 0o600); err != nil {
						t.Fatal(err)
					}
					c, err := config.Load(path)
					if err != nil {
						t.Fatalf("config %s: %v", b, err)
					}
					e, err := New(Options{Home: home, Config: c, SupervisorArgv: []string{os.Args[0], "supervise"}})
					if err != nil {
						t.Fatal(err)
					}
					defer e.Close()
					x, err := ExplainPolicy(home, "main", home, "echo hi")
					if err != nil {
						t.Fatal(err)
					}
					g := x.Gate
					line := "gate: " + g.Line()
					if !strings.HasPrefix(x.Text("main"), line+"\n") {
						t.Fatalf("explain does not start with the gate line %q:\n%s", line, x.Text("main"))
					}
					pl, aerr := e.plan(context.Background(), "main", apitype.ExecParams{Command: "echo hi"}, "")
					if hp.host == "node" {
						// No node is paired: the call fails, and the node
						// would judge it.
						if g.Host != "node" || !g.Applies || g.Ungated {
							t.Fatalf("node host: %+v", g)
						}
						return
					}
					if aerr != nil {
						// Sandbox without a usable backend: every call fails,
						// and nothing is gated or runs.
						if g.Host != "sandbox" || g.Applies || g.Ungated || aerr.Code != "sandbox_unavailable" {
							t.Fatalf("plan failed with %v; gate %+v", aerr, g)
						}
						return
					}
					gated := pl.Host == "gateway" && pl.HostReason == ""
					if g.Host != pl.Host || g.Applies != gated {
						t.Fatalf("plan runs on %s (reason %q, gated %v); gate status %+v", pl.Host, pl.HostReason, gated, g)
					}
					runsFree := pl.Host == "gateway" && (!gated || fullOff)
					if g.Ungated != runsFree {
						t.Fatalf("plan: host %s gated %v full/off %v; gate status says ungated=%v (%s)", pl.Host, gated, fullOff, g.Ungated, g.Reason)
					}
					if !g.Applies && (!strings.Contains(x.Text("main"), "\nverdict if the gate applied: ") || !strings.Contains(x.Text("main"), "\nif the gate applied: agent main · ")) {
						t.Fatalf("an ungated agent's policy line or verdict is not labelled:\n%s", x.Text("main"))
					}
					n++
				})
			}
		}
	}
	if n < 8 {
		t.Fatalf("only %d configurations reached a plan", n)
	}
}
