//go:build linux

package kube

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestKubeBench measures the kubernetes backend against the test cluster
// (CONCH_KUBE_BENCH=1; bench/k8s/bench.sh runs it): the time from an
// agent's first sandboxed exec to its result (pod created, started by the
// real node of realnode_test.go where one can run, else by the kubelet
// stand-in; conch node started, paired through TokenReview, the command
// run; no image pull: the image is on the node), the same claiming a
// warm-pool pod, and the round trip of `exec true` through a pod's node
// link against a run on the gateway itself, in one run.
func TestKubeBench(t *testing.T) {
	if os.Getenv("CONCH_KUBE_BENCH") == "" {
		t.Skip("a benchmark: CONCH_KUBE_BENCH=1 (bench/k8s/bench.sh)")
	}
	firsts, trips := 5, 50
	c := startCluster(t)
	c.setupNamespace(kubeNS)
	set, where := standInSettings, "the kubelet stand-in"
	apiserver, _ := apiserverBinary()
	if kubelet, why := realNodeMissing(apiserver); why == "" {
		set, where = realSettings, "a real kubelet with containerd and runc"
		startRealNode(t, c, kubeNS, kubelet)
	} else {
		t.Log("no real node: " + why)
		startKubelet(t, c, kubeNS)
	}
	conchPath := set.conchPath
	if conchPath == "" {
		conchPath = e2etest.ConchBin
	}
	listen := fmt.Sprintf("%s:%d", set.listenHost, e2etest.FreePort(t))
	gw := c.kubeconfig("conch-gateway", "")
	k := fmt.Sprintf(`{"kubeconfig": %q, "namespace": %q, "gatewayUrl": "http://%s", "image": "conch-test/sandbox:1",
		"conchPath": %q, "serviceAccountName": "conch-sandbox", "sandboxCrd": "never"}`, gw, kubeNS, listen, conchPath)
	var agents []string
	for i := range firsts {
		agents = append(agents, fmt.Sprintf(`"k%d": {}`, i), fmt.Sprintf(`"w%d": {"sandbox": {"kubernetes": {"warmPool": 1}}}`, i))
	}
	agents = append(agents, `"local": {"sandbox": {"mode": "off"}}`, `"nodeagent": {"sandbox": {"mode": "off"}, "tools": {"exec": {"host": "node", "security": "full", "ask": "off"}}}`)
	cfg := fmt.Sprintf(`{"sandbox": {"mode": "all", "backend": "kubernetes", "idleTimeout": "0", "kubernetes": %s}, "agents": {%s}}`, k, strings.Join(agents, ", "))
	home := e2etest.NewHome(t, cfg)
	env := &kubeEnv{c: c, ns: kubeNS, home: home, set: set, tokens: map[string]string{}}
	g := e2etest.StartNodeGateway(t, home, listen, env.serveFlags()...)
	env.g, env.tokens["main"] = g, g.Token
	for i := range firsts {
		env.tokens[fmt.Sprintf("k%d", i)] = addAgent(t, home, fmt.Sprintf("k%d", i))
		env.tokens[fmt.Sprintf("w%d", i)] = addAgent(t, home, fmt.Sprintf("w%d", i))
	}
	env.tokens["local"] = addAgent(t, home, "local")
	env.tokens["nodeagent"] = addAgent(t, home, "nodeagent")
	// A node host paired by hand, for the link's own cost.
	e2etest.PairNode(t, g, "plain", e2etest.NodeFullConfig)

	var first []time.Duration
	for i := range firsts {
		start := time.Now()
		m := env.execOK(t, fmt.Sprintf("k%d", i), map[string]any{"command": "echo hi"})
		first = append(first, time.Since(start))
		if !strings.Contains(text(m), "Waiting for sandbox pod") {
			t.Fatalf("not a first exec: %v", m)
		}
	}
	// The same with a warm pool of 1: each first exec claims the pod
	// the pool made ready (the wait for the refill is not timed).
	var warm []time.Duration
	for i := range firsts {
		e2etest.Eventually(t, 60*time.Second, func() string {
			if n := len(env.poolPods(t)); n != 1 {
				return fmt.Sprintf("%d ready pool pods", n)
			}
			return ""
		})
		start := time.Now()
		m := env.execOK(t, fmt.Sprintf("w%d", i), map[string]any{"command": "echo hi"})
		warm = append(warm, time.Since(start))
		if !strings.Contains(text(m), "from the warm pool") {
			t.Fatalf("not a claim: %v", m)
		}
	}
	trip := func(agent string) []time.Duration {
		var ds []time.Duration
		for range trips {
			start := time.Now()
			args := map[string]any{"command": benchCmd}
			if agent == "nodeagent" {
				args["node"] = "plain"
			}
			env.execOK(t, agent, args)
			ds = append(ds, time.Since(start))
		}
		return ds
	}
	// Interleaved halves, so that load changes hit both alike.
	trips /= 2
	pod, local, node := trip("k0"), trip("local"), trip("nodeagent")
	pod, local, node = append(pod, trip("k0")...), append(local, trip("local")...), append(node, trip("nodeagent")...)
	med := func(ds []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	rep := fmt.Sprintf("pods on %s\n"+
		"first sandboxed exec to result (pod create + start + conch node + pairing + run), median of %d: %v (min %v, max %v)\n"+
		"first sandboxed exec to result claiming a warm-pool pod (warmPool 1), median of %d: %v (min %v, max %v)\n"+
		"exec %q round trip, median of %d: pod node link %v, gateway %v, ratio %.2fx; a node host paired by hand %v\n",
		where, firsts, med(first).Round(time.Millisecond), minDur(first).Round(time.Millisecond), maxDur(first).Round(time.Millisecond),
		firsts, med(warm).Round(time.Millisecond), minDur(warm).Round(time.Millisecond), maxDur(warm).Round(time.Millisecond),
		benchCmd, len(pod), med(pod).Round(time.Microsecond*100), med(local).Round(time.Microsecond*100), float64(med(pod))/float64(med(local)), med(node).Round(time.Microsecond*100))
	t.Log("\n" + rep)
	if p := os.Getenv("CONCH_KUBE_BENCH_OUT"); p != "" {
		os.WriteFile(p, []byte(rep), 0o644)
	}
}

// benchCmd is the command of the round trips ($CONCH_KUBE_BENCH_CMD,
// default true).
var benchCmd = func() string {
	if c := os.Getenv("CONCH_KUBE_BENCH_CMD"); c != "" {
		return c
	}
	return "true"
}()

func addAgent(t *testing.T, home, name string) string {
	t.Helper()
	out, err := exec.Command(e2etest.ConchBin, "agents", "add", name, "--home", home, "--workspace", t.TempDir()).Output()
	if err != nil || !strings.HasPrefix(string(out), "cat_") {
		t.Fatalf("agents add %s: %v %s", name, err, out)
	}
	return strings.TrimSpace(string(out))
}

func minDur(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}

func maxDur(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
