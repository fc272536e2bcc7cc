package nodes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestNodeIdentitySquat is the squatting reproducer through the real
// binaries: a second node proposes the first node's id as its name. The
// name is rewritten at pairing, an agent bound to the first node by id
// runs there while both are online, and gets node_unavailable (never the
// squatter) once it is gone; operator commands by id are not ambiguous.
func TestNodeIdentitySquat(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, "")
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	n1, a := e2etest.PairNode(t, g, "n1", e2etest.NodeFullConfig)

	// The squatter proposes a's id, in upper case for good measure.
	sh := e2etest.NewHome(t, e2etest.NodeFullConfig)
	squat := e2etest.StartNode(t, sh, nil, "--gateway", g.Base, "--token", g.Invite("1h", true), "--name", strings.ToUpper(a))
	var sid string
	e2etest.Eventually(t, 15*time.Second, func() string {
		_, m := g.Do("GET", "/v1/nodes", g.Operator, nil, nil)
		for _, x := range m["pending"].([]any) {
			p := x.(map[string]any)
			sid = p["nodeId"].(string)
			if strings.EqualFold(p["name"].(string), a) || strings.HasPrefix(a, p["name"].(string)) {
				t.Fatalf("pending request took the id of n1 as its name: %v", p)
			}
			return ""
		}
		return "no pairing request"
	})
	if out, code := e2etest.RunCLIHome(t, gh, "nodes", "approve", sid); code != 0 {
		t.Fatalf("approve squatter: %d %s", code, out)
	}
	_, sq := g.NodeStatus("node-" + sid[:6])
	if sq != sid {
		t.Fatalf("squatter's name is not node-%s", sid[:6])
	}
	g.WaitNode("node-"+sid[:6], "connected")

	if out, code := e2etest.RunCLIHome(t, gh, "agents", "defaults", "main", "host=node", "node="+a, "security=full", "ask=off"); code != 0 {
		t.Fatalf("agents defaults: %d %s", code, out)
	}
	run := func() (map[string]any, int, string) {
		t.Helper()
		out, errOut, code := e2etest.RunCLI(t, nil, "exec", "--home", gh, "--json", "--", "pwd")
		var r map[string]any
		json.Unmarshal([]byte(strings.Split(strings.TrimSpace(out), "\n")[0]), &r)
		return r, code, out + errOut
	}
	// Both online: the binding by id is not ambiguous.
	r, code, out := run()
	if code != 0 || e2etest.Details(r)["nodeId"] != a {
		t.Fatalf("bound run with both nodes online: exit %d: %s", code, out)
	}
	// n1 gone: the squatter does not get the run.
	n1.Stop()
	g.WaitNode("n1", "offline")
	r, code, out = run()
	if code == 0 || strings.Contains(out, sid) || !strings.Contains(out, "node_unavailable") && !strings.Contains(out, "is not connected") {
		t.Fatalf("bound run with n1 offline: exit %d: %s", code, out)
	}
	// A per-call node naming the squatter another way is refused.
	if _, m := g.Tool("exec", map[string]any{"command": "true", "node": "node-" + sid[:6]}); e2etest.ErrCode(m) != "node_not_allowed" {
		t.Fatalf("call naming another node: %v", m)
	}
	// The squatter reconnects proposing another node's id again: its name
	// does not change (a node's name is the gateway's, set at pairing).
	squat.Stop()
	g.WaitNode("node-"+sid[:6], "offline")
	e2etest.StartNode(t, sh, nil, "--name", a)
	g.WaitNode("node-"+sid[:6], "connected")

	// A binding by a short prefix is refused; a long one is stored as the
	// full id.
	if out, code := e2etest.RunCLIHome(t, gh, "agents", "defaults", "main", "node="+a[:6]); code == 0 {
		t.Fatalf("binding by a 6-character prefix accepted: %s", out)
	}
	if out, code := e2etest.RunCLIHome(t, gh, "agents", "defaults", "main", "node="+strings.ToUpper(a[:12])); code != 0 {
		t.Fatalf("binding by a 12-character prefix: %d %s", code, out)
	}
	if out, _ := e2etest.RunCLIHome(t, gh, "agents", "defaults", "main"); !strings.Contains(out, "node="+a+".") {
		t.Fatalf("a prefix binding was not stored as the full id: %s", out)
	}
	// Operator commands by id: never ambiguous with a name.
	if out, code := e2etest.RunCLIHome(t, gh, "nodes", "remove", a); code != 0 {
		t.Fatalf("remove by id: %d %s", code, out)
	}
	if st, _ := g.NodeStatus("n1"); st != "" {
		t.Fatalf("n1 still listed: %s", st)
	}
	if st, _ := g.NodeStatus("node-" + sid[:6]); st != "connected" {
		t.Fatalf("the squatter was removed instead of n1: %s", st)
	}
	// The removed node's id now names nothing: node_unavailable, not the
	// squatter.
	r, code, out = run()
	if code == 0 || strings.Contains(out, sid) {
		t.Fatalf("bound to a removed node: exit %d: %s", code, out)
	}
}

// TestNodeRemovedNotResumed removes a node session while its node is
// down and restarts the gateway: the session is not mirrored again, and
// its kill reaches the node when the node is back.
func TestNodeRemovedNotResumed(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	n, _ := e2etest.PairNode(t, g, "gone", e2etest.NodeFullConfig)
	r := e2etest.ExecOK(t, g, map[string]any{"command": "sleep 971.3", "background": true})
	sid := e2etest.Details(r)["sessionId"].(string)
	e2etest.Eventually(t, 5*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 971.3")) != 1 {
			return "sleep 971.3 not running"
		}
		return ""
	})
	n.Stop()
	g.WaitNode("gone", "offline")
	if _, m := g.Tool("process", map[string]any{"action": "remove", "sessionId": sid}); !strings.Contains(m["text"].(string), "Removed session") {
		t.Fatalf("remove while away: %v", m)
	}
	routes := func() string {
		b, _ := os.ReadFile(filepath.Join(gh, "nodes", "sessions.json"))
		return string(b)
	}
	addr := strings.TrimPrefix(g.Base, "http://")
	g = g.RestartOn(addr)
	if _, m := g.Tool("process", map[string]any{"action": "poll", "sessionId": sid}); e2etest.ErrCode(m) == "" {
		t.Fatalf("a removed session came back after the restart: %v", m)
	}
	if _, m := g.Tool("process", map[string]any{"action": "list"}); strings.Contains(m["text"].(string), sid) {
		t.Fatalf("a removed session is listed after the restart: %v", m)
	}
	e2etest.StartNode(t, n.Home, nil)
	g.WaitNode("gone", "connected")
	e2etest.Eventually(t, 20*time.Second, func() string {
		if p := e2etest.Pgrep("^sleep 971.3"); len(p) > 0 {
			return "sleep 971.3 still runs on the node"
		}
		if strings.Contains(routes(), sid) {
			return "nodes/sessions.json still has the session: " + routes()
		}
		return ""
	})
	if _, err := os.Stat(filepath.Join(gh, "sessions", sid)); err == nil {
		t.Fatalf("the removed session's directory is still on the gateway")
	}
}

// TestNodeKillWhileAwayRestart kills a node session while its node is
// down, then restarts the gateway before the node is back: the kill was
// recorded with the session's route and still reaches the node.
func TestNodeKillWhileAwayRestart(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	n, _ := e2etest.PairNode(t, g, "away2", e2etest.NodeFullConfig)
	r := e2etest.ExecOK(t, g, map[string]any{"command": "sleep 971.4", "background": true})
	sid := e2etest.Details(r)["sessionId"].(string)
	e2etest.Eventually(t, 5*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 971.4")) != 1 {
			return "sleep 971.4 not running"
		}
		return ""
	})
	n.Stop()
	g.WaitNode("away2", "offline")
	if _, m := g.Tool("process", map[string]any{"action": "kill", "sessionId": sid}); !strings.Contains(m["text"].(string), "Termination requested") {
		t.Fatalf("kill while away: %v", m)
	}
	g = g.RestartOn(strings.TrimPrefix(g.Base, "http://"))
	e2etest.StartNode(t, n.Home, nil)
	g.WaitNode("away2", "connected")
	e2etest.Eventually(t, 20*time.Second, func() string {
		_, m := g.Tool("process", map[string]any{"action": "poll", "sessionId": sid})
		if e2etest.Details(m)["state"] != "killed" {
			return "not killed yet: " + fmt.Sprint(e2etest.Details(m))
		}
		return ""
	})
	if p := e2etest.Pgrep("^sleep 971.4"); len(p) > 0 {
		t.Fatalf("sleep 971.4 survived: %v", p)
	}
}

// TestNodeRemovedEndsSessions removes a node while one of its sessions
// runs: the gateway's session ends (lost, with the reason) instead of
// showing "running" for ever to an agent that can no longer reach it,
// and a restarted gateway does not mirror it again.
func TestNodeRemovedEndsSessions(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	_, id := e2etest.PairNode(t, g, "doomed", e2etest.NodeFullConfig)
	r := e2etest.ExecOK(t, g, map[string]any{"command": "sleep 971.6", "background": true})
	sid := e2etest.Details(r)["sessionId"].(string)
	e2etest.Eventually(t, 10*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 971.6")) != 1 {
			return "sleep 971.6 not running"
		}
		return ""
	})
	if out, code := e2etest.RunCLIHome(t, gh, "nodes", "remove", id); code != 0 {
		t.Fatalf("remove: %d %s", code, out)
	}
	ended := func() {
		t.Helper()
		e2etest.Eventually(t, 15*time.Second, func() string {
			_, m := g.Tool("process", map[string]any{"action": "poll", "sessionId": sid})
			if e2etest.Details(m)["state"] != "lost" || !strings.Contains(fmt.Sprint(m), "removed") {
				return "session of the removed node not ended: " + fmt.Sprint(m)
			}
			return ""
		})
	}
	ended()
	b, _ := os.ReadFile(filepath.Join(gh, "nodes", "sessions.json"))
	if strings.Contains(string(b), sid) {
		t.Fatalf("nodes/sessions.json still routes the session: %s", b)
	}
	g = g.RestartOn(strings.TrimPrefix(g.Base, "http://"))
	ended()
}
