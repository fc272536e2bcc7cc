package e2etest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nodeTestPing (CONCH_NODE_PING_MS) is the keepalive of the node tests'
// gateways and nodes: shorter than the default 30 s so that reconnection
// backoffs start at 1 s, long enough that a connection survives a loaded
// machine (an end drops the link when no pong comes within three
// intervals: with 300 ms, a process starved for 0.9 s, as on a 2-core
// machine running several test binaries, lost its node, which a test
// then saw "offline" while it waited for "connected"). A stopped node or
// gateway closes its sockets, so no test waits for a keepalive to see it
// go; only a cut link needs one (nodeFastPing).
const nodeTestPing = "1000"

// StartNodeGateway runs `conch serve` for node tests on listen.
func StartNodeGateway(t testing.TB, home, listen string, extra ...string) *Gateway {
	t.Helper()
	return StartNodeGatewayPing(t, home, listen, nodeTestPing, extra...)
}

// StartNodeGatewayPing is StartNodeGateway with a keepalive of ping ms.
func StartNodeGatewayPing(t testing.TB, home, listen, ping string, extra ...string) *Gateway {
	t.Helper()
	return StartServe(t, home, []string{"CONCH_NODE_PING_MS=" + ping}, append([]string{"--listen", listen}, extra...)...)
}

// restart stops the gateway and starts it again on the same address.
func (g *Gateway) RestartOn(listen string) *Gateway {
	g.T.Helper()
	g.Stop()
	ng := StartNodeGateway(g.T, g.Home, listen)
	ng.Token = g.Token
	return ng
}

// nodeProc is a running `conch node`.
type nodeProc struct {
	t    testing.TB
	Home string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

type lockedWriter struct{ n *nodeProc }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	return w.n.out.Write(p)
}

// StartNode runs `conch node` with args; prefix (e.g. ip netns exec) is
// put in front of the binary.
func StartNode(t testing.TB, home string, prefix []string, args ...string) *nodeProc {
	t.Helper()
	n := &nodeProc{t: t, Home: home, done: make(chan struct{})}
	argv := append(append(append([]string{}, prefix...), ConchBin, "node", "--home", home, "--log-level", "warn"), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "CONCH_NODE_PING_MS="+nodeTestPing)
	cmd.Stdout, cmd.Stderr = lockedWriter{n}, lockedWriter{n}
	cmd.Dir = home
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd = cmd
	go func() { cmd.Wait(); close(n.done) }()
	t.Cleanup(func() {
		n.Stop()
		// Supervisors end their sessions on SIGTERM.
		exec.Command("pkill", "-TERM", "-f", "supervise --home "+home).Run()
	})
	return n
}

func (n *nodeProc) Output() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.out.String()
}

func (n *nodeProc) Stop() {
	select {
	case <-n.done:
		return
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(Slow(10 * time.Second)):
		n.cmd.Process.Kill()
		<-n.done
	}
}

// Exited waits for the node to exit and returns its code and output.
func (n *nodeProc) Exited(d time.Duration) (int, string) {
	n.t.Helper()
	select {
	case <-n.done:
	case <-time.After(Slow(d)):
		n.t.Fatalf("conch node still running after %v: %s", d, n.Output())
	}
	return n.cmd.ProcessState.ExitCode(), n.Output()
}

// Invite creates a join token through the API.
func (g *Gateway) Invite(ttl string, once bool) string {
	g.T.Helper()
	code, m := g.Do("POST", "/v1/nodes/invites", g.Operator, map[string]any{"ttl": ttl, "once": once}, nil)
	tok, _ := m["token"].(string)
	if code != 200 || !strings.HasPrefix(tok, "cnj_") {
		g.T.Fatalf("invite: %d %v", code, m)
	}
	return tok
}

// NodeStatus returns the status of the node named name ("" if unknown)
// and its id.
func (g *Gateway) NodeStatus(name string) (string, string) {
	g.T.Helper()
	code, m := g.Do("GET", "/v1/nodes", g.Operator, nil, nil)
	if code != 200 {
		g.T.Fatalf("GET /v1/nodes: %d %v", code, m)
	}
	list, _ := m["nodes"].([]any)
	for _, x := range list {
		n := x.(map[string]any)
		if n["name"] == name {
			return n["status"].(string), n["nodeId"].(string)
		}
	}
	return "", ""
}

// WaitNode waits until the node name has status and returns its id.
func (g *Gateway) WaitNode(name, status string) string {
	g.T.Helper()
	var id string
	Eventually(g.T, 15*time.Second, func() string {
		var st string
		st, id = g.NodeStatus(name)
		if st != status {
			return fmt.Sprintf("node %s is %q, want %q", name, st, status)
		}
		return ""
	})
	return id
}

// PairNode starts a node with a fresh invite and approves it through the
// API; it returns the node process and its id.
func PairNode(t testing.TB, g *Gateway, name, config string, prefix ...string) (*nodeProc, string) {
	t.Helper()
	home := NewHome(t, config)
	n := StartNode(t, home, prefix, "--gateway", g.Base, "--token", g.Invite("1h", true), "--name", name)
	id := g.WaitNode(name, "pending")
	if code, m := g.Do("POST", "/v1/nodes/"+id+"/approve", g.Operator, nil, nil); code != 200 {
		t.Fatalf("approve: %d %v", code, m)
	}
	Eventually(t, 15*time.Second, func() string {
		if st, _ := g.NodeStatus(name); st != "connected" {
			return fmt.Sprintf("node %s is %q, want \"connected\"; its output:\n%s", name, st, n.Output())
		}
		return ""
	})
	return n, id
}

// api runs a tool through the HTTP API as agent main.
func (g *Gateway) Tool(name string, args map[string]any) (int, map[string]any) {
	g.T.Helper()
	return g.Do("POST", "/v1/"+name, g.Token, args, nil)
}

// Details is the "details" object of an HTTP API answer.
func Details(m map[string]any) map[string]any {
	d, _ := m["details"].(map[string]any)
	return d
}

// ErrCode is the error code of an HTTP API answer ("" if none).
func ErrCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// ErrText is the error message of an HTTP API answer ("" if none).
func ErrText(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["message"].(string)
	return c
}

// NodeGatewayConfig is a gateway config that runs exec on a node, ungated.
const NodeGatewayConfig = `{"tools":{"exec":{"host":"node","security":"full","ask":"off"}}}`

// NodeFullConfig is a node host config that runs what it is sent, ungated.
const NodeFullConfig = `{"tools":{"exec":{"security":"full","ask":"off"}}}`

// ExecOK runs exec through the API and fails the test on an error.
func ExecOK(t testing.TB, g *Gateway, args map[string]any) map[string]any {
	t.Helper()
	code, m := g.Tool("exec", args)
	if code != 200 {
		t.Fatalf("exec %v: %d %v", args, code, m)
	}
	return m
}
