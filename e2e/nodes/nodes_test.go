package nodes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// Node host tests: real `conch serve` and `conch node`
// processes on one machine, talking over real sockets.

// nodeFastPing is the keepalive of a test that cuts a link and waits for
// both ends to notice.
const nodeFastPing = "300"

func TestNodePairing(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")

	// The CLI talks to the running gateway through its engine socket.
	out, err := exec.Command(e2etest.ConchBin, "nodes", "invite", "--home", gh, "--once", "--json").Output()
	if err != nil {
		t.Fatalf("conch nodes invite: %v", err)
	}
	var inv struct{ Token string }
	json.Unmarshal(out, &inv)
	if !strings.HasPrefix(inv.Token, "cnj_") {
		t.Fatalf("invite output: %s", out)
	}
	b, _ := os.ReadFile(filepath.Join(gh, "nodes", "invites.json"))
	if bytes.Contains(b, []byte(inv.Token)) {
		t.Fatal("join token stored in clear")
	}

	ah := e2etest.NewHome(t, e2etest.NodeFullConfig)
	a := e2etest.StartNode(t, ah, nil, "--gateway", g.Base, "--token", inv.Token, "--name", "Build 1")
	id := g.WaitNode("build-1", "pending") // a request shows the name it would get
	if len(id) != 24 {
		t.Fatalf("node id %q", id)
	}
	if out, _ := exec.Command(e2etest.ConchBin, "doctor", "--home", gh).CombinedOutput(); !strings.Contains(string(out), "nodes.pending") {
		t.Fatalf("doctor does not report the pairing request: %s", out)
	}
	// No exec before approval.
	if code, m := g.Tool("exec", map[string]any{"command": "echo hi"}); e2etest.ErrCode(m) != "node_unavailable" {
		t.Fatalf("exec before approval: %d %v", code, m)
	}
	// The once-token is used: a second node is refused.
	bh := e2etest.NewHome(t, e2etest.NodeFullConfig)
	bnode := e2etest.StartNode(t, bh, nil, "--gateway", g.Base, "--token", inv.Token, "--name", "intruder")
	if code, text := bnode.Exited(10 * time.Second); code == 0 || !strings.Contains(text, "join token already used") {
		t.Fatalf("reused join token: exit %d: %s", code, text)
	}
	// An expired and an unknown token are refused.
	exp := g.Invite("1ms", false)
	time.Sleep(20 * time.Millisecond)
	for _, tok := range []string{exp, "cnj_nosuchtoken"} {
		ch := e2etest.NewHome(t, e2etest.NodeFullConfig)
		c := e2etest.StartNode(t, ch, nil, "--gateway", g.Base, "--token", tok)
		if code, text := c.Exited(10 * time.Second); code == 0 || !strings.Contains(text, "refused the join token") {
			t.Fatalf("token %s: exit %d: %s", tok, code, text)
		}
	}

	out, err = exec.Command(e2etest.ConchBin, "nodes", "approve", "build-1", "--home", gh).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Approved node "+id) {
		t.Fatalf("conch nodes approve: %v %s", err, out)
	}
	g.WaitNode("build-1", "connected")
	e2etest.Eventually(t, 5*time.Second, func() string {
		if !strings.Contains(a.Output(), "paired as "+id) {
			return "node did not report pairing: " + a.Output()
		}
		return ""
	})
	fi, err := os.Stat(filepath.Join(ah, "node", "node.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node.json: %v %v", err, fi)
	}
	if fi, err := os.Stat(filepath.Join(ah, "node", "identity.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity.key: %v", err)
	}
	nj, _ := os.ReadFile(filepath.Join(ah, "node", "node.json"))
	if !bytes.Contains(nj, []byte(`"nodeToken": "cnt_`)) && !bytes.Contains(nj, []byte(`"nodeToken":"cnt_`)) {
		t.Fatalf("node.json has no node token: %s", nj)
	}
	// Metrics and listing.
	req := map[string]string{}
	_ = req
	code, m := g.Do("GET", "/v1/nodes", g.Operator, nil, nil)
	if code != 200 || m["connected"] != float64(1) {
		t.Fatalf("GET /v1/nodes: %d %v", code, m)
	}
	if code, _ := g.Do("GET", "/v1/nodes", g.Token, nil, nil); code != 403 {
		t.Fatalf("agent token on /v1/nodes: %d", code)
	}

	// The node token survives a node restart (no invite needed).
	a.Stop()
	g.WaitNode("build-1", "offline")
	a = e2etest.StartNode(t, ah, nil)
	g.WaitNode("build-1", "connected")
	if r := e2etest.ExecOK(t, g, map[string]any{"command": "echo via-node"}); !strings.Contains(r["text"].(string), "via-node") {
		t.Fatalf("exec: %v", r)
	}

	// Rename, then remove: the node is told and stops.
	if code, m := g.Do("PATCH", "/v1/nodes/"+id[:12], g.Operator, map[string]any{"name": "Renamed Box"}, nil); code != 200 || m["name"] != "renamed-box" {
		t.Fatalf("rename: %d %v", code, m)
	}
	out, err = exec.Command(e2etest.ConchBin, "nodes", "remove", "renamed-box", "--home", gh).CombinedOutput()
	if err != nil {
		t.Fatalf("conch nodes remove: %v %s", err, out)
	}
	if code, text := a.Exited(10 * time.Second); code == 0 || !strings.Contains(text, "removed") {
		t.Fatalf("removed node: exit %d: %s", code, text)
	}
	if st, _ := g.NodeStatus("renamed-box"); st != "" {
		t.Fatalf("removed node still listed: %s", st)
	}
	// Operators saw the whole life of the node as events (replayed from
	// the ring).
	evs := e2etest.ReadSSE(t, g.Base+"/v1/events", g.Operator, nil, func(e e2etest.SSEEvent) bool { return e.Event == "node.removed" }, 10*time.Second)
	var kinds []string
	for _, e := range evs {
		if strings.HasPrefix(e.Event, "node.") && strings.Contains(e.Data, id) {
			kinds = append(kinds, e.Event)
		}
	}
	if got := strings.Join(kinds, ","); !strings.HasPrefix(got, "node.pairing.requested,node.connected,node.disconnected,node.connected,node.renamed,") ||
		!strings.HasSuffix(got, "node.removed") {
		t.Fatalf("node events: %s", got)
	}
	// Its token no longer works.
	a = e2etest.StartNode(t, ah, nil)
	if code, text := a.Exited(10 * time.Second); code == 0 || !strings.Contains(text, "refused this node's token") {
		t.Fatalf("revoked token: exit %d: %s", code, text)
	}
}

func TestNodeExecAndProcess(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	_, id1 := e2etest.PairNode(t, g, "alpha", e2etest.NodeFullConfig)
	n2, id2 := e2etest.PairNode(t, g, "beta", e2etest.NodeFullConfig)

	// Selection.
	if _, m := g.Tool("exec", map[string]any{"command": "true"}); e2etest.ErrCode(m) != "node_ambiguous" ||
		e2etest.ErrText(m) != "exec host=node requires a node id when multiple nodes are available (set tools.exec.node or exec.node)." {
		t.Fatalf("two nodes, no query: %v", m)
	}
	if _, m := g.Tool("exec", map[string]any{"command": "true", "node": "gamma"}); e2etest.ErrCode(m) != "node_unknown" ||
		e2etest.ErrText(m) != "unknown node: gamma (known: alpha, beta)" {
		t.Fatalf("unknown node: %v", m)
	}
	if _, m := g.Tool("exec", map[string]any{"command": "true", "host": "gateway"}); e2etest.ErrCode(m) != "host_not_allowed" {
		t.Fatalf("host=gateway on a node-configured gateway: %v", m)
	}

	// Foreground on alpha by name, beta by id; an id prefix names no node
	// for a run.
	wd := t.TempDir()
	r := e2etest.ExecOK(t, g, map[string]any{"command": "echo out; echo err >&2; pwd; exit 3", "node": "ALPHA", "workdir": wd})
	d := e2etest.Details(r)
	if d["status"] != "completed" || d["exitCode"] != float64(3) || d["host"] != "node" || d["nodeId"] != id1 ||
		!strings.Contains(r["text"].(string), "out\n") || !strings.Contains(r["text"].(string), "err\n") || !strings.Contains(r["text"].(string), wd+"\n") {
		t.Fatalf("foreground on alpha: %v", r)
	}
	if _, m := g.Tool("exec", map[string]any{"command": "true", "node": id2[:12]}); e2etest.ErrCode(m) != "node_unknown" || !strings.Contains(e2etest.ErrText(m), "prefix") {
		t.Fatalf("exec by id prefix: %v", m)
	}
	r = e2etest.ExecOK(t, g, map[string]any{"command": "echo $CONCH_SHELL $OPENCLAW_SHELL $FOO", "node": strings.ToUpper(id2), "env": map[string]any{"FOO": "bar"}})
	if d := e2etest.Details(r); d["nodeId"] != id2 || !strings.Contains(r["text"].(string), "exec exec bar") {
		t.Fatalf("foreground on beta: %v", r)
	}
	if _, m := g.Tool("exec", map[string]any{"command": "true", "node": "beta", "env": map[string]any{"PATH": "/x"}}); e2etest.ErrCode(m) != "security_violation" {
		t.Fatalf("PATH override: %v", m)
	}

	// Background with input, poll, log, search, kill.
	r = e2etest.ExecOK(t, g, map[string]any{"command": "echo ready; read x; echo got $x; exec sleep 970.1", "node": "beta", "background": true})
	sid := e2etest.Details(r)["sessionId"].(string)
	if e2etest.Details(r)["nodeId"] != id2 || e2etest.Details(r)["status"] != "running" {
		t.Fatalf("background: %v", r)
	}
	proc := func(args map[string]any) map[string]any {
		args["sessionId"] = sid
		_, m := g.Tool("process", args)
		return m
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		if m := proc(map[string]any{"action": "log"}); !strings.Contains(m["text"].(string), "ready") {
			return "no ready: " + m["text"].(string)
		}
		return ""
	})
	if m := proc(map[string]any{"action": "write", "data": "hello\n"}); e2etest.Details(m)["status"] != "running" {
		t.Fatalf("write: %v", m)
	}
	if m := proc(map[string]any{"action": "wait", "until": "regex", "pattern": "got hello", "timeout": 10000}); !strings.Contains(m["text"].(string), "got hello") {
		t.Fatalf("wait pattern: %v", m)
	}
	if m := proc(map[string]any{"action": "search", "pattern": "got h"}); !strings.Contains(m["text"].(string), "got hello") {
		t.Fatalf("search: %v", m)
	}
	e2etest.Eventually(t, 5*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 970.1")) != 1 {
			out, _ := exec.Command("sh", "-c", "ps -eo pid,args | grep 970").Output()
			return "sleep 970.1 not running: " + string(out)
		}
		return ""
	})
	_, lm := g.Tool("process", map[string]any{"action": "list"})
	found := false
	for _, x := range e2etest.Details(lm)["sessions"].([]any) {
		e := x.(map[string]any)
		if e["sessionId"] == sid && e["nodeId"] == id2 && e["host"] == "node" {
			found = true
		}
	}
	if !found {
		t.Fatalf("list: %v", lm)
	}
	if m := proc(map[string]any{"action": "kill"}); !strings.Contains(m["text"].(string), "Killed session") {
		t.Fatalf("kill: %v", m)
	}
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep("^sleep 970.1"); len(p) > 0 {
			return "sleep 970.1 survived the kill: " + strings.Join(p, " ")
		}
		return ""
	})
	if m := proc(map[string]any{"action": "poll"}); e2etest.Details(m)["state"] != "killed" {
		t.Fatalf("poll after kill: %v", m)
	}

	// Timeout kills the whole tree on the node.
	r = e2etest.ExecOK(t, g, map[string]any{"command": "sleep 970.2 & sleep 970.3; echo never", "node": "alpha", "timeout": 1})
	if d := e2etest.Details(r); d["status"] != "failed" || d["timedOut"] != true {
		t.Fatalf("timeout: %v", r)
	}
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep("^sleep 970.[23]"); len(p) > 0 {
			return "tree survived the timeout: " + strings.Join(p, " ")
		}
		return ""
	})

	// PTY: the node's supervisor keeps the screen.
	r = e2etest.ExecOK(t, g, map[string]any{"command": `printf '\033[2J\033[HNODE-PTY %s\n' "$(tty | cut -c1-8)"; sleep 970.4`, "node": "alpha", "pty": true, "background": true})
	psid := e2etest.Details(r)["sessionId"].(string)
	e2etest.Eventually(t, 10*time.Second, func() string {
		_, m := g.Tool("process", map[string]any{"action": "screen", "sessionId": psid})
		if !strings.Contains(m["text"].(string), "NODE-PTY /dev/pts") {
			return "screen: " + m["text"].(string)
		}
		return ""
	})
	// Ctrl-C through the node's PTY ends the run; then clear it.
	if _, m := g.Tool("process", map[string]any{"action": "send-keys", "sessionId": psid, "keys": []string{"C-c"}}); e2etest.Details(m)["status"] != "running" {
		t.Fatalf("send-keys: %v", m)
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		_, m := g.Tool("process", map[string]any{"action": "poll", "sessionId": psid})
		if e2etest.Details(m)["status"] == "running" {
			return "C-c did not end the PTY run: " + fmt.Sprint(m)
		}
		return ""
	})
	if _, m := g.Tool("process", map[string]any{"action": "clear", "sessionId": psid}); !strings.HasPrefix(m["text"].(string), "Cleared session") {
		t.Fatalf("clear: %v", m)
	}
	if len(e2etest.Pgrep("^sleep 970.4")) > 0 {
		t.Fatal("sleep 970.4 survived C-c")
	}

	// Per-agent binding: bound to alpha, a call for beta is refused.
	if code, m := g.Do("PUT", "/v1/agents/main/exec-defaults", g.Operator, map[string]any{"node": "alpha"}, nil); code != 200 {
		t.Fatalf("exec-defaults: %d %v", code, m)
	}
	if _, m := g.Tool("exec", map[string]any{"command": "true", "node": "beta"}); e2etest.ErrCode(m) != "node_not_allowed" || e2etest.ErrText(m) != "exec node not allowed (bound to alpha)" {
		t.Fatalf("binding: %v", m)
	}
	if r := e2etest.ExecOK(t, g, map[string]any{"command": "echo bound"}); e2etest.Details(r)["nodeId"] != id1 {
		t.Fatalf("bound run: %v", r)
	}
	g.Do("DELETE", "/v1/agents/main/exec-defaults", g.Operator, nil, nil)

	// An offline node is named in the error.
	n2.Stop()
	g.WaitNode("beta", "offline")
	if _, m := g.Tool("exec", map[string]any{"command": "true", "node": "beta"}); e2etest.ErrCode(m) != "node_unavailable" ||
		e2etest.ErrText(m) != fmt.Sprintf("node beta (%s) is not connected.", id2) {
		t.Fatalf("offline node: %v", m)
	}
	req, _ := http.NewRequest("GET", g.Base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+g.Operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "\nconch_nodes_connected 1\n") || !strings.Contains(string(body), `host="node"`) {
		t.Fatalf("metrics: %s", body)
	}
}

func TestNodePolicy(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	// The gateway allows everything; the nodes' own policy decides.
	e2etest.PairNode(t, g, "locked", `{"tools":{"exec":{"security":"deny"}}}`)
	strict, _ := e2etest.PairNode(t, g, "strict", `{"tools":{"exec":{"security":"allowlist","ask":"off"}}}`)
	asking, askingID := e2etest.PairNode(t, g, "asking", `{"tools":{"exec":{"security":"allowlist","ask":"on-miss"}}}`)

	if code, m := g.Tool("exec", map[string]any{"command": "echo hi", "node": "locked"}); e2etest.ErrCode(m) != "denied" || !strings.HasPrefix(e2etest.ErrText(m), "SYSTEM_RUN_DISABLED: security=deny") {
		t.Fatalf("node security=deny: %d %v", code, m)
	}
	made := filepath.Join(t.TempDir(), "made")
	if code, m := g.Tool("exec", map[string]any{"command": "touch " + made, "node": "strict"}); e2etest.ErrCode(m) != "denied" || !strings.HasPrefix(e2etest.ErrText(m), "SYSTEM_RUN_DENIED: ") {
		t.Fatalf("node allowlist miss: %d %v", code, m)
	}
	// The operator edits the node's own file through the gateway.
	cli := func(stdin string, args ...string) (string, int) {
		cmd := exec.Command(e2etest.ConchBin, append(args, "--home", gh)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := cli("", "approvals", "get", "--node", "strict")
	var cur struct{ Path, Hash string }
	if json.Unmarshal([]byte(out), &cur) != nil || code != 0 || cur.Path != filepath.Join(strict.Home, "exec-approvals.json") {
		t.Fatalf("approvals get --node: %d %s", code, out)
	}
	// The same from another machine: --gateway and the operator token.
	remote := exec.Command(e2etest.ConchBin, "approvals", "get", "--node", "strict", "--home", t.TempDir(), "--gateway", g.Base, "--token", g.Operator)
	if rout, err := remote.CombinedOutput(); err != nil || !bytes.Contains(rout, []byte(cur.Hash)) {
		t.Fatalf("approvals get --node --gateway: %v %s", err, rout)
	}
	touch, _ := exec.LookPath("touch")
	file := `{"version":1,"agents":{"main":{"allowlist":[{"pattern":"` + touch + `"}]}}}`
	if out, code := cli(file, "approvals", "set", "-", "--node", "strict", "--base-hash", "stale"); code != 5 {
		t.Fatalf("stale base hash: %d %s", code, out)
	}
	if out, code := cli(file, "approvals", "set", "-", "--node", "strict", "--base-hash", cur.Hash); code != 0 {
		t.Fatalf("approvals set --node: %d %s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(gh, "exec-approvals.json")); bytes.Contains(b, []byte(touch)) {
		t.Fatalf("the gateway's file changed: %s", b)
	}
	if r := e2etest.ExecOK(t, g, map[string]any{"command": "touch " + made, "node": "strict"}); e2etest.Details(r)["status"] != "completed" {
		t.Fatalf("after the node's allowlist changed: %v", r)
	}
	if _, err := os.Stat(made); err != nil {
		t.Fatal(err)
	}

	// allow-once: approved once, consumed; the next identical run asks again.
	wd := t.TempDir()
	run := map[string]any{"command": "printf once-ok", "node": "asking", "workdir": wd}
	r := e2etest.ExecOK(t, g, run)
	d := e2etest.Details(r)
	if d["status"] != "approval-pending" || d["host"] != "node" || d["nodeId"] != askingID || d["nodeName"] != "asking" {
		t.Fatalf("want approval-pending on the node: %v", r)
	}
	aid, sid := d["approvalId"].(string), d["sessionId"].(string)
	code, ap := g.Do("GET", "/v1/approvals/"+aid, g.Operator, nil, nil)
	if code != 200 || !strings.Contains(fmt.Sprint(ap), "node") {
		t.Fatalf("approval record: %d %v", code, ap)
	}
	if code, m := g.Do("POST", "/v1/approvals/"+aid+"/decision", g.Operator, map[string]any{"decision": "allow-once"}, nil); code != 200 {
		t.Fatalf("decide: %d %v", code, m)
	}
	var seen strings.Builder
	e2etest.Eventually(t, 10*time.Second, func() string {
		_, m := g.Tool("process", map[string]any{"action": "poll", "sessionId": sid})
		seen.WriteString(m["text"].(string))
		// poll reads on from the last poll: the output may have come
		// with an earlier one.
		if !strings.Contains(seen.String(), "once-ok") || e2etest.Details(m)["status"] != "completed" {
			return "approved run: " + fmt.Sprint(m)
		}
		return ""
	})
	e2etest.Eventually(t, 5*time.Second, func() string {
		_, m := g.Tool("process", map[string]any{"action": "list"})
		seen.WriteString(m["text"].(string))
		if want := fmt.Sprintf("Exec finished (node=%s id=%s, session=%s, code 0)", askingID, aid, sid); !strings.Contains(seen.String(), want) {
			return "no " + want + " in " + seen.String()
		}
		return ""
	})
	// The approval cannot be used again.
	if code, m := g.Do("POST", "/v1/approvals/"+aid+"/decision", g.Operator, map[string]any{"decision": "allow-once"}, nil); code != 409 {
		t.Fatalf("second decision: %d %v", code, m)
	}
	r = e2etest.ExecOK(t, g, run)
	if d := e2etest.Details(r); d["status"] != "approval-pending" || d["approvalId"] == aid {
		t.Fatalf("allow-once was not consumed: %v", r)
	}
	g.Do("POST", "/v1/approvals/"+e2etest.Details(r)["approvalId"].(string)+"/decision", g.Operator, map[string]any{"decision": "deny"}, nil)

	// allow-always is persisted in the node's own approvals file; the next
	// run needs no approval.
	run = map[string]any{"command": "printf always-ok", "node": "asking", "workdir": wd}
	r = e2etest.ExecOK(t, g, run)
	if e2etest.Details(r)["status"] != "approval-pending" {
		t.Fatalf("want approval-pending: %v", r)
	}
	aid, sid = e2etest.Details(r)["approvalId"].(string), e2etest.Details(r)["sessionId"].(string)
	if code, m := g.Do("POST", "/v1/approvals/"+aid+"/decision", g.Operator, map[string]any{"decision": "allow-always"}, nil); code != 200 {
		t.Fatalf("decide: %d %v", code, m)
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		_, m := g.Tool("process", map[string]any{"action": "poll", "sessionId": sid})
		if !strings.Contains(m["text"].(string), "always-ok") {
			return "approved run: " + fmt.Sprint(m)
		}
		return ""
	})
	if b, _ := os.ReadFile(filepath.Join(asking.Home, "exec-approvals.json")); !bytes.Contains(b, []byte("printf")) {
		t.Fatalf("node file has no printf entry: %s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(gh, "exec-approvals.json")); bytes.Contains(b, []byte("printf")) {
		t.Fatalf("gateway file changed: %s", b)
	}
	if r := e2etest.ExecOK(t, g, run); e2etest.Details(r)["status"] != "completed" || !strings.Contains(r["text"].(string), "always-ok") {
		t.Fatalf("after allow-always: %v", r)
	}
}

func TestNodeGatewayRestartResync(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	n, _ := e2etest.PairNode(t, g, "survivor", e2etest.NodeFullConfig)
	r := e2etest.ExecOK(t, g, map[string]any{"command": "for i in $(seq 1 50); do echo line $i; sleep 0.1; done; sleep 0.2", "background": true})
	sid := e2etest.Details(r)["sessionId"].(string)
	time.Sleep(500 * time.Millisecond)
	addr := strings.TrimPrefix(g.Base, "http://")
	// The gateway dies without a chance to clean up.
	g.Cmd.Process.Kill()
	g.Cmd.Wait()
	time.Sleep(time.Second) // the node goes on writing its journal meanwhile
	g = g.RestartOn(addr)
	g.WaitNode("survivor", "connected")
	// Then the node restarts too: its supervisors keep the run going.
	n.Stop()
	g.WaitNode("survivor", "offline")
	time.Sleep(300 * time.Millisecond)
	n = e2etest.StartNode(t, n.Home, nil)
	g.WaitNode("survivor", "connected")
	var text string
	e2etest.Eventually(t, 15*time.Second, func() string {
		_, m := g.Tool("process", map[string]any{"action": "poll", "sessionId": sid, "timeout": 500})
		if e2etest.Details(m)["status"] == "running" {
			return "still running"
		}
		_, lm := g.Tool("process", map[string]any{"action": "log", "sessionId": sid})
		text = lm["text"].(string)
		return ""
	})
	checkLines(t, text, 50)
}

// checkLines checks that text is exactly "line 1" … "line n".
func checkLines(t *testing.T, text string, n int) {
	t.Helper()
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("line %d", i))
	}
	if got := strings.TrimSpace(text); got != strings.Join(want, "\n") {
		t.Fatalf("output after resync is not complete and in order:\n%s", got)
	}
}

// TestNodeNetnsLinkCut puts a node in its own network namespace, joined
// to the gateway by a veth pair on a private /30, cuts the link while a
// run prints, restores it, and checks that the gateway's copy of the
// output is complete once the node has reconnected and resynchronised.
func TestNodeNetnsLinkCut(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root for ip netns and veth")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) is not installed")
	}
	id := os.Getpid() % 100000
	ns := fmt.Sprintf("conch-t%d", id)
	vh, vn := fmt.Sprintf("cvh%d", id), fmt.Sprintf("cvn%d", id)
	hostIP, nodeIP := fmt.Sprintf("10.231.%d.1", id%250+1), fmt.Sprintf("10.231.%d.2", id%250+1)
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := ip("netns", "add", ns); err != nil {
		t.Skipf("cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() {
		ip("link", "del", vh)
		ip("netns", "del", ns)
	})
	for _, args := range [][]string{
		{"link", "add", vh, "type", "veth", "peer", "name", vn, "netns", ns},
		{"addr", "add", hostIP + "/30", "dev", vh},
		{"link", "set", vh, "up"},
		{"-n", ns, "addr", "add", nodeIP + "/30", "dev", vn},
		{"-n", ns, "link", "set", vn, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			t.Skipf("cannot set up the veth link: %v", err)
		}
	}
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGatewayPing(t, gh, hostIP+":0", nodeFastPing, "--insecure-listen")
	_, nid := e2etest.PairNode(t, g, "isolated", e2etest.NodeFullConfig, "ip", "netns", "exec", ns, "env", "CONCH_NODE_PING_MS="+nodeFastPing)
	_, m := g.Do("GET", "/v1/nodes", g.Operator, nil, nil)
	if !strings.Contains(fmt.Sprint(m), "remoteIp:"+nodeIP) {
		t.Fatalf("node did not connect over the veth link: %v", m)
	}
	// The run prints a line every 0.1 s, and the number of its last line
	// to progress, until the test creates gate: it outlasts the cut
	// however slow the machine, and the test sees it go on printing
	// while its node is away.
	dir := t.TempDir()
	progress, gate := filepath.Join(dir, "progress"), filepath.Join(dir, "gate")
	cmd := fmt.Sprintf("i=0; while [ ! -e %s ]; do i=$((i+1)); echo line $i; echo $i > %s.new; mv %s.new %s; sleep 0.1; done", gate, progress, progress, progress)
	r := e2etest.ExecOK(t, g, map[string]any{"command": cmd, "background": true})
	sid := e2etest.Details(r)["sessionId"].(string)
	if e2etest.Details(r)["nodeId"] != nid {
		t.Fatalf("run not on the isolated node: %v", r)
	}
	printed := func() int {
		b, _ := os.ReadFile(progress)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	logText := func() string {
		_, m := g.Tool("process", map[string]any{"action": "log", "sessionId": sid})
		s, _ := m["text"].(string)
		return s
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		if !strings.Contains(logText(), "line 3\n") {
			return "no output yet: " + logText()
		}
		return ""
	})
	if err := ip("-n", ns, "link", "set", vn, "down"); err != nil {
		t.Fatal(err)
	}
	cutAt := strings.Count(logText(), "\n")
	g.WaitNode("isolated", "offline")
	// The node goes on journaling while the link is down.
	offlineAt := printed()
	e2etest.Eventually(t, 10*time.Second, func() string {
		if n := printed(); n < offlineAt+10 {
			return fmt.Sprintf("the run printed %d lines, %d when its node went offline", n, offlineAt)
		}
		return ""
	})
	during := strings.Count(logText(), "\n")
	if err := ip("-n", ns, "link", "set", vn, "up"); err != nil {
		t.Fatal(err)
	}
	g.WaitNode("isolated", "connected")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var text string
	e2etest.Eventually(t, 15*time.Second, func() string {
		_, m := g.Tool("process", map[string]any{"action": "poll", "sessionId": sid, "timeout": 500})
		if e2etest.Details(m)["status"] != "completed" {
			return "not completed: " + fmt.Sprint(e2etest.Details(m))
		}
		text = logText()
		return ""
	})
	total := printed()
	t.Logf("lines mirrored at the cut: %d, while offline: %d, printed in all: %d", cutAt, during, total)
	if during >= offlineAt+10 {
		t.Fatalf("%d lines mirrored while the link was down, the node had printed only %d when it went offline: the link was not cut", during, offlineAt)
	}
	checkLines(t, text, total)
}

// TestNodeApplyPatch applies a patch on the agent's node, in the node's
// workspace for the agent.
func TestNodeApplyPatch(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, `{"tools":{"exec":{"host":"node","security":"full","ask":"off","applyPatch":{"enabled":true}}}}`)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	ws := t.TempDir()
	_, id := e2etest.PairNode(t, g, "patcher", `{"agents":{"main":{"workspace":"`+ws+`"}},"tools":{"exec":{"security":"full","ask":"off"}}}`)
	code, m := g.Tool("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: sub/hello.txt\n+hi from the node\n*** End Patch"})
	if code != 200 || e2etest.Details(m)["status"] != "completed" {
		t.Fatalf("apply_patch: %d %v", code, m)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sub", "hello.txt")); err != nil || string(b) != "hi from the node\n" {
		t.Fatalf("patched file on the node: %q %v", b, err)
	}
	// Outside the node's workspace: refused by the node's own workspaceOnly.
	code, m = g.Tool("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch"})
	if code == 200 {
		t.Fatalf("patch outside the workspace: %d %v", code, m)
	}
	// The ledger is written a moment after the call (engine/ledger.go).
	e2etest.Eventually(t, 5*time.Second, func() string {
		out, _ := exec.Command(e2etest.ConchBin, "ledger", "tail", "--home", gh, "--json").Output()
		if !strings.Contains(string(out), id) {
			return "no patch record naming the node in the gateway ledger: " + string(out)
		}
		return ""
	})
}

// TestNodeApprovedOffline approves a pairing request with `conch nodes
// approve` while no gateway runs (on the files); the node gets its token
// at its next connection with the same join token.
func TestNodeApprovedOffline(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	n := e2etest.StartNode(t, e2etest.NewHome(t, e2etest.NodeFullConfig), nil, "--gateway", g.Base, "--token", g.Invite("1h", true), "--name", "late")
	id := g.WaitNode("late", "pending")
	addr := strings.TrimPrefix(g.Base, "http://")
	g.Stop()
	out, err := exec.Command(e2etest.ConchBin, "nodes", "approve", id[:12], "--home", gh).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Approved node "+id) {
		t.Fatalf("offline approve: %v %s", err, out)
	}
	g = g.RestartOn(addr)
	g.WaitNode("late", "connected")
	e2etest.Eventually(t, 5*time.Second, func() string {
		if !strings.Contains(n.Output(), "paired as "+id) {
			return "no token delivered: " + n.Output()
		}
		return ""
	})
	if r := e2etest.ExecOK(t, g, map[string]any{"command": "echo late-ok"}); !strings.Contains(r["text"].(string), "late-ok") {
		t.Fatalf("exec: %v", r)
	}
}

// TestNodeKillWhileAway kills a node session while its node is down: the
// kill is delivered when the node is back.
func TestNodeKillWhileAway(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	n, _ := e2etest.PairNode(t, g, "away", e2etest.NodeFullConfig)
	r := e2etest.ExecOK(t, g, map[string]any{"command": "sleep 971.1", "background": true})
	sid := e2etest.Details(r)["sessionId"].(string)
	e2etest.Eventually(t, 5*time.Second, func() string {
		if len(e2etest.Pgrep("^sleep 971.1")) != 1 {
			return "sleep 971.1 not running"
		}
		return ""
	})
	n.Stop()
	g.WaitNode("away", "offline")
	if len(e2etest.Pgrep("^sleep 971.1")) != 1 {
		t.Fatal("the session did not survive its node's restart")
	}
	if _, m := g.Tool("process", map[string]any{"action": "kill", "sessionId": sid}); !strings.Contains(m["text"].(string), "Termination requested") {
		t.Fatalf("kill while away: %v", m)
	}
	e2etest.StartNode(t, n.Home, nil)
	e2etest.Eventually(t, 15*time.Second, func() string {
		_, m := g.Tool("process", map[string]any{"action": "poll", "sessionId": sid})
		if e2etest.Details(m)["state"] != "killed" {
			return "not killed yet: " + fmt.Sprint(e2etest.Details(m))
		}
		return ""
	})
	// The end state may come as the SIGKILLed sleep is still exiting.
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep("^sleep 971.1"); len(p) > 0 {
			return fmt.Sprintf("sleep 971.1 survived: %v", p)
		}
		return ""
	})
}
