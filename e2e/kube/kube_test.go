//go:build linux

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubernetes sandbox backend end to end: a real conch serve, a real
// kube-apiserver with etcd (kubeharness_test.go), and the real `conch
// node` of each sandbox pod dialling the real gateway with its pod-bound
// join token. The pods run on a real node (realnode_test.go: containerd,
// runc, the kubelet, CNI) where one can run; elsewhere on the kubelet
// stand-in, which runs each pod's command as a local process. The test
// log says which (set CONCH_KUBE_REAL_NODE=0 to force the stand-in).

// podNode is what runs the pods: the real node or the kubelet stand-in.
type podNode interface {
	// workspace is pod name's /workspace on this machine.
	workspace(name string) string
	// workdir is what pwd prints in pod name's /workspace.
	workdir(name string) string
	// evict has the node evict pod name; evictReason is a phrase of
	// the eviction message.
	evict(name string)
	evictReason() string
	// nodeNotReady has the pod's node stop reporting, its pod marked
	// not Ready; darken then kills what runs in the pod.
	nodeNotReady(name string)
	darken(name string)
	// nodeBack has the node report again.
	nodeBack()
	nodeName() string
}

// kubeSettings are the settings that differ between the real node and
// the stand-in.
type kubeSettings struct {
	real         bool
	listenHost   string // where the gateway listens: the pods dial it there
	conchPath    string // conch in the sandbox image
	runtimeClass string
	handler      string
	pullFail     string // an image whose pull fails at once
	pullFailWhy  string // what the pull error says
	hold         string // template settings whose pod stays Pending
	evictLimits  string // the "resources" of agent evict
}

var standInSettings = kubeSettings{listenHost: "127.0.0.1", conchPath: "", runtimeClass: "gvisor", handler: "runsc",
	pullFail: "registry.invalid/nope:1", pullFailWhy: "no such host", hold: `"image": "conch-test/hold:1"`, evictLimits: `{}`}

var realSettings = kubeSettings{real: true, listenHost: bridgeAddr, conchPath: "/conch", runtimeClass: "conch-runc", handler: "runc",
	pullFail: refusedRegistry + "/nope:1", pullFailWhy: "connection refused", hold: `"nodeSelector": {"pool": "nowhere"}`,
	evictLimits: `{"limits": {"ephemeral-storage": "16Mi"}}`}

// kubeEnv is one cluster, namespace, kubelet stand-in and gateway shared
// by the subtests of TestKubeSandbox.
type kubeEnv struct {
	c       *testCluster
	ns      string
	kubelet podNode
	set     kubeSettings
	g       *e2etest.Gateway
	home    string
	tokens  map[string]string // agent -> token
}

const kubeNS = "conch-test"

func kubeConfig(t *testing.T, c *testCluster, listen string, set kubeSettings) string {
	t.Helper()
	agent := func(idle, kube string) string {
		return fmt.Sprintf(`{"sandbox": {"idleTimeout": %q, "kubernetes": {%s}}}`, idle, kube)
	}
	closed := e2etest.FreePort(t)
	conchPath := set.conchPath
	if conchPath == "" {
		conchPath = e2etest.ConchBin
	}
	return fmt.Sprintf(`{
  "tools": {"exec": {"applyPatch": {"enabled": true}}},
  "sandbox": {"mode": "all", "backend": "kubernetes", "idleTimeout": "0", "kubernetes": {
    "kubeconfig": %q, "namespace": %q, "gatewayUrl": "http://%s", "image": "conch-test/sandbox:1",
    "conchPath": %q, "serviceAccountName": "conch-sandbox", "sandboxCrd": "never", "startupTimeout": "60s"}},
  "agents": {
    "main": %s,
    "idle": %s,
    "pullfail": %s,
    "norbac": %s,
    "unreach": %s,
    "hold": %s,
    "evict": %s,
    "gone": %s,
    "crd": %s,
    "stale": %s,
    "slow": %s,
    "nodelost": %s,
    "warm": %s,
    "sh1": {"sandbox": {"scope": "shared"}},
    "sh2": {"sandbox": {"scope": "shared"}},
    "nodehost": {"sandbox": {"mode": "off"}, "tools": {"exec": {"host": "node", "security": "full", "ask": "off"}}}
  }
}`, c.kubeconfig("conch-gateway", ""), kubeNS, listen, conchPath,
		agent("0", `"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}}, "runtimeClassName": "`+set.runtimeClass+`", "nodeSelector": {"pool": "sandboxes"}, "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}], "networkPolicy": {"policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": "127.0.0.0/8"}}]}]}`),
		agent("4s", ""),
		agent("0", `"image": "`+set.pullFail+`"`),
		agent("0", fmt.Sprintf(`"kubeconfig": %q`, c.kubeconfig("nobody", ""))),
		agent("0", fmt.Sprintf(`"kubeconfig": %q`, c.kubeconfig("conch-gateway", fmt.Sprintf("https://127.0.0.1:%d", closed)))),
		agent("0", set.hold),
		agent("0", `"resources": `+set.evictLimits),
		agent("0", ""),
		agent("30m", `"sandboxCrd": "always"`),
		agent("4s", ""),
		agent("0", set.hold+`, "startupTimeout": "2s"`),
		agent("0", `"nodeLostGrace": "2s"`),
		agent("4s", `"warmPool": 1`))
}

func TestKubeSandbox(t *testing.T) {
	c := startCluster(t)
	c.setupNamespace(kubeNS)
	c.installSandboxCRD()
	env := &kubeEnv{c: c, ns: kubeNS, tokens: map[string]string{}, set: standInSettings}
	apiserver, _ := apiserverBinary()
	if kubelet, why := realNodeMissing(apiserver); why == "" {
		t.Log("pods run on a real node: containerd, runc and the kubelet (" + kubelet + ")")
		env.set = realSettings
		env.kubelet = startRealNode(t, c, kubeNS, kubelet)
	} else {
		t.Log("pods run on the kubelet stand-in, not a real kubelet: " + why)
		env.kubelet = startKubelet(t, c, kubeNS)
	}
	// The RuntimeClass admission plugin refuses a pod whose RuntimeClass
	// does not exist.
	if _, err := c.admin.NodeV1().RuntimeClasses().Create(context.Background(), &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: env.set.runtimeClass}, Handler: env.set.handler}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startSandboxController(t, c, kubeNS)
	listen := fmt.Sprintf("%s:%d", env.set.listenHost, e2etest.FreePort(t))
	env.home = e2etest.NewHome(t, kubeConfig(t, c, listen, env.set))
	env.g = e2etest.StartNodeGateway(t, env.home, listen, env.serveFlags()...)
	env.tokens["main"] = env.g.Token
	for _, a := range []string{"idle", "pullfail", "norbac", "unreach", "hold", "evict", "gone", "crd", "stale", "nodehost", "slow", "sh1", "sh2", "nodelost", "warm"} {
		out, err := exec.Command(e2etest.ConchBin, "agents", "add", a, "--home", env.home, "--workspace", t.TempDir()).Output()
		if err != nil || !strings.HasPrefix(string(out), "cat_") {
			t.Fatalf("agents add %s: %v %s", a, err, out)
		}
		env.tokens[a] = strings.TrimSpace(string(out))
	}
	t.Run("CreateReuse", env.testCreateReuse)
	t.Run("ApplyPatch", env.testApplyPatch)
	t.Run("SharedScope", env.testShared)
	t.Run("PodBoundJoinToken", env.testPodBoundJoinToken)
	t.Run("StartupTimeout", env.testStartupTimeout)
	t.Run("ImagePullFailure", env.testImagePull)
	t.Run("RBACRefusal", env.testRBAC)
	t.Run("Unreachable", env.testUnreachable)
	t.Run("Evicted", env.testEvicted)
	t.Run("Deleted", env.testDeleted)
	t.Run("NodeLost", env.testNodeLost)
	t.Run("IdleDeletion", env.testIdle)
	t.Run("SandboxCRD", env.testCRD)
	t.Run("GatewayRestart", env.testGatewayRestart)
	t.Run("GoneWhileGatewayDown", env.testGoneWhileDown)
	t.Run("WarmPool", env.testWarmPool)
	t.Run("Recreate", env.testRecreate)
	t.Run("PruneAfterGatewayStop", env.testPrune)
}

// serveFlags are the gateway's flags beyond its address: on the real
// node it listens on the pods' bridge, not on loopback.
func (e *kubeEnv) serveFlags() []string {
	if e.set.real {
		return []string{"--insecure-listen"}
	}
	return nil
}

// restartGateway stops the gateway and starts it again on listen.
// The new gateway belongs to the old one's test (it outlives a subtest).
func (e *kubeEnv) restartGateway(listen string) *e2etest.Gateway {
	e.g.Stop()
	g := e2etest.StartNodeGateway(e.g.T, e.home, listen, e.serveFlags()...)
	g.Token = e.g.Token
	return g
}

// exec runs exec as agent and returns the HTTP status and answer.
func (e *kubeEnv) exec(t *testing.T, agent string, args map[string]any) (int, map[string]any) {
	t.Helper()
	return e.g.Do("POST", "/v1/exec", e.tokens[agent], args, nil)
}

func (e *kubeEnv) execOK(t *testing.T, agent string, args map[string]any) map[string]any {
	t.Helper()
	code, m := e.exec(t, agent, args)
	if code != 200 || e2etest.ErrCode(m) != "" {
		t.Fatalf("exec as %s %v: %d %v", agent, args, code, m)
	}
	return m
}

// pods returns the sandbox pods of scope (not being deleted).
func (e *kubeEnv) pods(t *testing.T, scope string) []corev1.Pod {
	t.Helper()
	l, err := e.c.admin.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "conch.sh/scope=" + scope})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func (e *kubeEnv) onePod(t *testing.T, scope string) corev1.Pod {
	t.Helper()
	var p corev1.Pod
	e2etest.Eventually(t, 30*time.Second, func() string {
		ps := e.pods(t, scope)
		if len(ps) != 1 {
			return fmt.Sprintf("%d pods of scope %s, want 1", len(ps), scope)
		}
		p = ps[0]
		return ""
	})
	return p
}

func (e *kubeEnv) noPod(t *testing.T, scope string) {
	t.Helper()
	e2etest.Eventually(t, 30*time.Second, func() string {
		l, _ := e.c.admin.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "conch.sh/scope=" + scope})
		if len(l.Items) != 0 {
			return fmt.Sprintf("%d pods of scope %s left", len(l.Items), scope)
		}
		return ""
	})
}

func text(m map[string]any) string {
	s, _ := m["text"].(string)
	return s
}

func (e *kubeEnv) testCreateReuse(t *testing.T) {
	m := e.execOK(t, "main", map[string]any{"command": "pwd; echo made > f; echo hi from $HOSTNAME"})
	pod := e.onePod(t, "agent-main")
	out := text(m)
	// The command ran in the pod: its /workspace (on the stand-in, its
	// directory for it), its hostname.
	if !strings.Contains(out, e.kubelet.workdir(pod.Name)) || !strings.Contains(out, "hi from "+pod.Name) {
		t.Fatalf("first exec did not run in pod %s: %v", pod.Name, m)
	}
	if !strings.Contains(out, "Waiting for sandbox pod "+kubeNS+"/"+pod.Name) {
		t.Fatalf("no progress line: %q", out)
	}
	d := e2etest.Details(m)
	if sb, _ := d["sandbox"].(map[string]any); sb["backend"] != "kubernetes" || d["host"] != "sandbox" {
		t.Fatalf("details: %v", d)
	}
	// The template reached the pod.
	spec := pod.Spec
	tolerated := false
	for _, tl := range spec.Tolerations {
		tolerated = tolerated || tl.Key == "sandbox" && tl.Operator == corev1.TolerationOpExists && tl.Effect == corev1.TaintEffectNoSchedule
	}
	if spec.RuntimeClassName == nil || *spec.RuntimeClassName != e.set.runtimeClass || spec.NodeSelector["pool"] != "sandboxes" ||
		!tolerated || spec.Containers[0].Resources.Requests.Cpu().String() != "100m" ||
		*spec.AutomountServiceAccountToken || spec.ServiceAccountName != "conch-sandbox" {
		t.Fatalf("pod spec: %+v", spec)
	}
	if nps, err := e.c.admin.NetworkingV1().NetworkPolicies(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=conch"}); err != nil ||
		len(nps.Items) != 1 || nps.Items[0].Spec.PodSelector.MatchLabels["app.kubernetes.io/managed-by"] != "conch" || len(nps.Items[0].Spec.Egress) != 1 {
		t.Fatalf("network policy: %v %v", nps, err)
	}
	// Paired without a human: no pairing request waits.
	_, nl := e.g.Do("GET", "/v1/nodes", e.g.Operator, nil, nil)
	if p, _ := nl["pending"].([]any); len(p) != 0 {
		t.Fatalf("pending pairing requests: %v", nl)
	}
	// A sandbox pod is no node host: an agent with host=node finds no
	// node, and naming the pod's node is refused.
	if _, m := e.exec(t, "nodehost", map[string]any{"command": "true"}); e2etest.ErrCode(m) != "node_unavailable" {
		t.Fatalf("host=node reached a sandbox pod: %v", m)
	}
	if _, m := e.exec(t, "nodehost", map[string]any{"command": "true", "node": pod.Name}); e2etest.ErrCode(m) != "node_unavailable" || !strings.Contains(e2etest.ErrText(m), "sandbox pod") {
		t.Fatalf("host=node naming a sandbox pod: %v", m)
	}
	// Reuse: the same pod, its files, no wait.
	m = e.execOK(t, "main", map[string]any{"command": "cat f; echo $HOSTNAME"})
	if out := text(m); strings.Contains(out, "Waiting") || !strings.Contains(out, "made") || !strings.Contains(out, pod.Name) {
		t.Fatalf("second exec: %v", m)
	}
	if ps := e.pods(t, "agent-main"); len(ps) != 1 || ps[0].UID != pod.UID {
		t.Fatalf("pods after reuse: %d", len(ps))
	}
	// process works over the node link: a background session, polled.
	m = e.execOK(t, "main", map[string]any{"command": "echo bg; sleep 0.2; echo done", "background": true})
	sid, _ := e2etest.Details(m)["sessionId"].(string)
	seen := text(m)
	e2etest.Eventually(t, 20*time.Second, func() string {
		_, pm := e.g.Do("POST", "/v1/process", e.tokens["main"], map[string]any{"action": "poll", "sessionId": sid}, nil)
		seen += text(pm) // a poll returns the output new since the last
		if e2etest.Details(pm)["status"] != "completed" || !strings.Contains(seen, "bg") || !strings.Contains(seen, "done") {
			return fmt.Sprintf("poll: %v (output so far %q)", pm, seen)
		}
		return ""
	})
}

// testApplyPatch: apply_patch applies in the agent's pod, in its
// /workspace, through the pod's node; outside the workspace is refused.
func (e *kubeEnv) testApplyPatch(t *testing.T) {
	pod := e.onePod(t, "agent-main")
	code, m := e.g.Do("POST", "/v1/apply_patch", e.tokens["main"], map[string]any{"input": "*** Begin Patch\n*** Add File: sub/hello.txt\n+hi from the patch\n*** End Patch"}, nil)
	if code != 200 || e2etest.Details(m)["status"] != "completed" {
		t.Fatalf("apply_patch into the pod: %d %v", code, m)
	}
	m = e.execOK(t, "main", map[string]any{"command": "cat sub/hello.txt; echo on $HOSTNAME"})
	if !strings.Contains(text(m), "hi from the patch") || !strings.Contains(text(m), "on "+pod.Name) {
		t.Fatalf("the patched file in the pod: %v", m)
	}
	if _, err := os.Stat(filepath.Join(e.kubelet.workspace(pod.Name), "sub", "hello.txt")); err != nil {
		t.Fatalf("not in the pod's /workspace: %v", err)
	}
	code, m = e.g.Do("POST", "/v1/apply_patch", e.tokens["main"], map[string]any{"input": "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch"}, nil)
	if code == 200 && e2etest.Details(m)["status"] == "completed" {
		t.Fatalf("a patch outside the pod's workspace: %d %v", code, m)
	}
}

// testShared: agents with scope shared share one pod; an agent-scoped
// agent has its own.
func (e *kubeEnv) testShared(t *testing.T) {
	m1 := e.execOK(t, "sh1", map[string]any{"command": "echo from sh1 > shared-file; echo on $HOSTNAME"})
	m2 := e.execOK(t, "sh2", map[string]any{"command": "cat shared-file; echo on $HOSTNAME"})
	pod := e.onePod(t, "shared")
	if !strings.Contains(text(m1), "on "+pod.Name) || !strings.Contains(text(m2), "on "+pod.Name) || !strings.Contains(text(m2), "from sh1") {
		t.Fatalf("shared scope: %v / %v", m1, m2)
	}
	if strings.Contains(text(m2), "Waiting") {
		t.Fatalf("the second agent waited for a pod: %v", m2)
	}
}

// testPodBoundJoinToken: the join token of a pod is useless without that
// pod's own service-account token.
func (e *kubeEnv) testPodBoundJoinToken(t *testing.T) {
	done := make(chan map[string]any, 1)
	go func() {
		_, m := e.g.Do("POST", "/v1/exec", e.tokens["hold"], map[string]any{"command": "true"}, nil)
		done <- m
	}()
	pod := e.onePod(t, "agent-hold")
	var join string
	for _, v := range pod.Spec.Containers[0].Env {
		if v.Name == "CONCH_NODE_JOIN_TOKEN" {
			join = v.Value
		}
	}
	if !strings.HasPrefix(join, "cnj_") {
		t.Fatalf("no join token in the pod: %+v", pod.Spec.Containers[0].Env)
	}
	try := func(podToken string) string {
		t.Helper()
		h := e2etest.NewHome(t, "")
		args := []string{"node", "--home", h, "--gateway", e.g.Base, "--token", join, "--name", "intruder", "--log-level", "warn"}
		if podToken != "" {
			f := filepath.Join(t.TempDir(), "token")
			os.WriteFile(f, []byte(podToken), 0o600)
			args = append(args, "--pod-token-file", f)
		}
		ctx, cancel := context.WithTimeout(context.Background(), e2etest.Slow(30*time.Second))
		defer cancel()
		cmd := exec.CommandContext(ctx, e2etest.ConchBin, args...)
		cmd.Env = append(os.Environ(), "CONCH_NODE_JOIN_TOKEN=", "CONCH_NODE_POD_TOKEN_FILE=")
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := try(""); !strings.Contains(out, "bound to a sandbox pod") {
		t.Fatalf("join token without a pod token: %s", out)
	}
	// A token of the right service account, bound to another pod.
	other := e.onePod(t, "agent-main")
	tr, err := e.c.admin.CoreV1().ServiceAccounts(e.ns).CreateToken(context.Background(), "conch-sandbox", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences:      []string{"conch"},
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: other.Name, UID: other.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out := try(tr.Status.Token); !strings.Contains(out, "bound to pod "+other.Name) {
		t.Fatalf("join token with another pod's token: %s", out)
	}
	// A token for the API server (wrong audience).
	tr, _ = e.c.admin.CoreV1().ServiceAccounts(e.ns).CreateToken(context.Background(), "conch-sandbox", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
	if out := try(tr.Status.Token); !strings.Contains(out, "did not accept") {
		t.Fatalf("join token with an API-audience token: %s", out)
	}
	// The waiting call fails when its pod is deleted, with the reason.
	e.c.admin.CoreV1().Pods(e.ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	select {
	case m := <-done:
		if e2etest.ErrCode(m) != "sandbox_unavailable" || !strings.Contains(e2etest.ErrText(m), "deleted before it connected") {
			t.Fatalf("held pod deleted: %v", m)
		}
	case <-time.After(e2etest.Slow(60 * time.Second)):
		t.Fatal("the call waiting for a deleted pod did not end")
	}
	_, nl := e.g.Do("GET", "/v1/nodes", e.g.Operator, nil, nil)
	if strings.Contains(fmt.Sprint(nl), "intruder") {
		t.Fatalf("an intruder paired or waits: %v", nl)
	}
}

// testStartupTimeout: a pod that never runs fails the call after
// sandbox.kubernetes.startupTimeout, saying what the pod was doing, and
// is deleted.
func (e *kubeEnv) testStartupTimeout(t *testing.T) {
	start := time.Now()
	_, m := e.exec(t, "slow", map[string]any{"command": "true"})
	if e2etest.ErrCode(m) != "sandbox_unavailable" || !strings.Contains(e2etest.ErrText(m), "did not start and connect within 2s (sandbox.kubernetes.startupTimeout): phase Pending") {
		t.Fatalf("startup timeout: %v", m)
	}
	if d := time.Since(start); d > e2etest.Slow(30*time.Second) {
		t.Fatalf("the call took %v", d)
	}
	e.noPod(t, "agent-slow")
}

func (e *kubeEnv) testImagePull(t *testing.T) {
	_, m := e.exec(t, "pullfail", map[string]any{"command": "true"})
	if e2etest.ErrCode(m) != "sandbox_unavailable" || !strings.Contains(e2etest.ErrText(m), "ErrImagePull") || !strings.Contains(e2etest.ErrText(m), e.set.pullFailWhy) {
		t.Fatalf("image pull failure: %v", m)
	}
	e.noPod(t, "agent-pullfail")
}

func (e *kubeEnv) testRBAC(t *testing.T) {
	_, m := e.exec(t, "norbac", map[string]any{"command": "true"})
	if e2etest.ErrCode(m) != "sandbox_unavailable" || !strings.Contains(e2etest.ErrText(m), "RBAC") || !strings.Contains(e2etest.ErrText(m), `User "nobody" cannot create resource "pods"`) {
		t.Fatalf("RBAC refusal: %v", m)
	}
}

func (e *kubeEnv) testUnreachable(t *testing.T) {
	_, m := e.exec(t, "unreach", map[string]any{"command": "true"})
	if e2etest.ErrCode(m) != "sandbox_unavailable" || !strings.Contains(e2etest.ErrText(m), "cannot reach the kubernetes API server") || !strings.Contains(e2etest.ErrText(m), "connection refused") {
		t.Fatalf("unreachable cluster: %v", m)
	}
}

// lostWith runs a background session as agent, lets f remove its pod,
// and checks that the session ends lost with want in its reason, that the
// next call reports it once, and that the one after gets a new pod.
func (e *kubeEnv) lostWith(t *testing.T, agent string, f func(pod string), want string, afterLoss ...func()) {
	m := e.execOK(t, agent, map[string]any{"command": "echo started; exec sleep 977", "background": true})
	sid, _ := e2etest.Details(m)["sessionId"].(string)
	pod := e.onePod(t, "agent-"+agent)
	seen := text(m)
	e2etest.Eventually(t, 20*time.Second, func() string {
		_, pm := e.g.Do("POST", "/v1/process", e.tokens[agent], map[string]any{"action": "poll", "sessionId": sid}, nil)
		seen += text(pm)
		if !strings.Contains(seen, "started") {
			return fmt.Sprintf("poll: %v", pm)
		}
		return ""
	})
	f(pod.Name)
	e2etest.Eventually(t, 30*time.Second, func() string {
		_, pm := e.g.Do("POST", "/v1/process", e.tokens[agent], map[string]any{"action": "poll", "sessionId": sid}, nil)
		if e2etest.Details(pm)["state"] != "lost" || !strings.Contains(fmt.Sprint(pm), want) {
			return fmt.Sprintf("session not lost with %q: %v", want, pm)
		}
		return ""
	})
	for _, f := range afterLoss {
		f()
	}
	e.noPod(t, "agent-"+agent)
	_, m = e.exec(t, agent, map[string]any{"command": "true"})
	if e2etest.ErrCode(m) != "sandbox_unavailable" || !strings.Contains(e2etest.ErrText(m), want) {
		t.Fatalf("the call after the loss: %v", m)
	}
	m = e.execOK(t, agent, map[string]any{"command": "echo again on $HOSTNAME"})
	if p := e.onePod(t, "agent-"+agent); p.UID == pod.UID || !strings.Contains(text(m), "again on "+p.Name) {
		t.Fatalf("no new pod after the loss: %v", m)
	}
}

func (e *kubeEnv) testEvicted(t *testing.T) {
	e.lostWith(t, "evict", e.kubelet.evict, e.kubelet.evictReason())
}

func (e *kubeEnv) testDeleted(t *testing.T) {
	e.lostWith(t, "gone", func(pod string) {
		if err := e.c.admin.CoreV1().Pods(e.ns).Delete(context.Background(), pod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}, "was deleted")
}

// testNodeLost: a pod whose node stops reporting (not Ready) while its
// node link stays up keeps its sessions; once its link is down as well
// for sandbox.kubernetes.nodeLostGrace (2 s here), they end lost with the
// reason. (A link that drops while the pod stays Ready is no loss either:
// GatewayRestart.)
func (e *kubeEnv) testNodeLost(t *testing.T) {
	var still string
	e.lostWith(t, "nodelost", func(pod string) {
		e.kubelet.nodeNotReady(pod)
		// Not Ready with the link up, for longer than the grace: the
		// session goes on and the pod takes new commands.
		e2etest.Eventually(t, 30*time.Second, func() string {
			p, err := e.c.admin.CoreV1().Pods(e.ns).Get(context.Background(), pod, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse {
					return ""
				}
			}
			return fmt.Sprintf("pod still ready: %v", p.Status.Conditions)
		})
		time.Sleep(3 * time.Second) // more than the grace: nothing may happen
		m := e.execOK(t, "nodelost", map[string]any{"command": "echo still on $HOSTNAME"})
		still = text(m)
		e.kubelet.darken(pod)
	}, "lost its node: pod Ready=False on node "+e.kubelet.nodeName(), e.kubelet.nodeBack)
	if !strings.Contains(still, "still on conch-agent-nodelost") {
		t.Fatalf("a not-ready pod with its link up refused a command: %q", still)
	}
}

func (e *kubeEnv) testIdle(t *testing.T) {
	e.execOK(t, "idle", map[string]any{"command": "true"})
	first := e.onePod(t, "agent-idle")
	// A running session keeps it: sleep past the idle timeout.
	m := e.execOK(t, "idle", map[string]any{"command": "sleep 5.5; echo slept"})
	if !strings.Contains(text(m), "slept") {
		t.Fatalf("long run: %v", m)
	}
	if p := e.pods(t, "agent-idle"); len(p) != 1 || p[0].UID != first.UID {
		t.Fatal("the pod went away while a command ran in it")
	}
	// Then, unused for 4 s, it is deleted.
	e.noPod(t, "agent-idle")
	m = e.execOK(t, "idle", map[string]any{"command": "echo back"})
	if !strings.Contains(text(m), "Waiting for sandbox pod") || strings.Contains(text(m), "sandbox_unavailable") {
		t.Fatalf("after idle deletion: %v", m)
	}
}

func (e *kubeEnv) testCRD(t *testing.T) {
	m := e.execOK(t, "crd", map[string]any{"command": "echo in $HOSTNAME"})
	sl, err := e.c.dyn.Resource(sandboxGVR).Namespace(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "conch.sh/scope=agent-crd"})
	if err != nil || len(sl.Items) != 1 {
		t.Fatalf("Sandbox objects: %v %v", sl, err)
	}
	s := sl.Items[0]
	if st, _, _ := unstructuredString(s.Object, "spec", "shutdownTime"); st == "" {
		t.Fatalf("no shutdownTime: %v", s.Object["spec"])
	}
	if !strings.Contains(text(m), "in "+s.GetName()) {
		t.Fatalf("not run in the Sandbox's pod: %v", m)
	}
	if out, code := e2etest.RunCLIHome(t, e.home, "sandbox", "recreate", "--agent", "crd"); code != 0 || !strings.Contains(out, s.GetName()) {
		t.Fatalf("recreate: %d %s", code, out)
	}
	e2etest.Eventually(t, 30*time.Second, func() string {
		sl, _ := e.c.dyn.Resource(sandboxGVR).Namespace(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "conch.sh/scope=agent-crd"})
		if len(sl.Items) != 0 {
			return "Sandbox not deleted"
		}
		return ""
	})
	e.noPod(t, "agent-crd")
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// testGatewayRestart: a session in a pod survives a gateway restart, and
// the restarted gateway finds the agent's pod again (no new pod).
func (e *kubeEnv) testGatewayRestart(t *testing.T) {
	pod := e.onePod(t, "agent-main")
	m := e.execOK(t, "main", map[string]any{"command": "echo before; read x; echo got $x", "background": true})
	sid, _ := e2etest.Details(m)["sessionId"].(string)
	e.g = e.restartGateway(strings.TrimPrefix(e.g.Base, "http://"))
	e.tokens["main"] = e.g.Token
	// The pod's node reconnects with its node token; the session is
	// still there, and takes input.
	e2etest.Eventually(t, 30*time.Second, func() string {
		_, pm := e.g.Do("POST", "/v1/process", e.tokens["main"], map[string]any{"action": "write", "sessionId": sid, "data": "yes\n"}, nil)
		if e2etest.ErrCode(pm) != "" {
			return fmt.Sprintf("write after restart: %v", pm)
		}
		return ""
	})
	seen := ""
	e2etest.Eventually(t, 30*time.Second, func() string {
		_, pm := e.g.Do("POST", "/v1/process", e.tokens["main"], map[string]any{"action": "poll", "sessionId": sid}, nil)
		seen += text(pm)
		if e2etest.Details(pm)["status"] != "completed" || !strings.Contains(seen, "got yes") {
			return fmt.Sprintf("poll after restart: %v (output %q)", pm, seen)
		}
		return ""
	})
	m = e.execOK(t, "main", map[string]any{"command": "cat f; echo on $HOSTNAME"})
	if out := text(m); strings.Contains(out, "Waiting") || !strings.Contains(out, "made") || !strings.Contains(out, "on "+pod.Name) {
		t.Fatalf("after the restart: %v", m)
	}
}

// testGoneWhileDown: a pod deleted while the gateway was down ends its
// sessions lost with the reason as the gateway starts — the first look
// at the session after the start already says so, with no exec first.
func (e *kubeEnv) testGoneWhileDown(t *testing.T) {
	m := e.execOK(t, "gone", map[string]any{"command": "echo started; exec sleep 977", "background": true})
	sid, _ := e2etest.Details(m)["sessionId"].(string)
	pod := e.onePod(t, "agent-gone")
	seen := text(m)
	e2etest.Eventually(t, 20*time.Second, func() string {
		_, pm := e.g.Do("POST", "/v1/process", e.tokens["gone"], map[string]any{"action": "poll", "sessionId": sid}, nil)
		seen += text(pm)
		if !strings.Contains(seen, "started") {
			return fmt.Sprintf("poll: %v", pm)
		}
		return ""
	})
	listen := strings.TrimPrefix(e.g.Base, "http://")
	tok, parent := e.g.Token, e.g.T // the gateway outlives this subtest
	e.g.Stop()
	if err := e.c.admin.CoreV1().Pods(e.ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.noPod(t, "agent-gone")
	e.g = e2etest.StartNodeGateway(parent, e.home, listen, e.serveFlags()...)
	e.g.Token = tok
	_, pm := e.g.Do("POST", "/v1/process", e.tokens["gone"], map[string]any{"action": "poll", "sessionId": sid}, nil)
	if e2etest.Details(pm)["state"] != "lost" || !strings.Contains(fmt.Sprint(pm), "sandbox pod "+kubeNS+"/"+pod.Name+" was deleted") {
		t.Fatalf("first look after the start: %v", pm)
	}
	_, m = e.exec(t, "gone", map[string]any{"command": "true"})
	if e2etest.ErrCode(m) != "sandbox_unavailable" || !strings.Contains(e2etest.ErrText(m), "was deleted") {
		t.Fatalf("the call after the loss: %v", m)
	}
	m = e.execOK(t, "gone", map[string]any{"command": "echo again on $HOSTNAME"})
	if p := e.onePod(t, "agent-gone"); p.UID == pod.UID || !strings.Contains(text(m), "again on "+p.Name) {
		t.Fatalf("no new pod after the loss: %v", m)
	}
}

// poolPods returns the warm-pool pods (not claimed, not being deleted)
// that are ready.
func (e *kubeEnv) poolPods(t *testing.T) []corev1.Pod {
	t.Helper()
	l, err := e.c.admin.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "conch.sh/pool"})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Annotations["conch.sh/warm"] == "ready" {
			out = append(out, p)
		}
	}
	return out
}

// testWarmPool: the agent "warm" (warmPool 1) finds a ready pod — the one
// started with the first gateway, taken back across two restarts, not a
// second one — and its first call claims it without waiting; the pool
// starts another.
func (e *kubeEnv) testWarmPool(t *testing.T) {
	var first corev1.Pod
	e2etest.Eventually(t, 60*time.Second, func() string {
		ps := e.poolPods(t)
		if len(ps) != 1 {
			return fmt.Sprintf("%d ready pool pods, want 1", len(ps))
		}
		first = ps[0]
		return ""
	})
	if l, _ := e.c.admin.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "conch.sh/pool"}); len(l.Items) != 1 {
		t.Fatalf("%d pool pods after the restarts, want 1", len(l.Items))
	}
	m := e.execOK(t, "warm", map[string]any{"command": "echo warm on $HOSTNAME"})
	out := text(m)
	if strings.Contains(out, "Waiting") || !strings.Contains(out, "Claimed sandbox pod "+kubeNS+"/"+first.Name+" from the warm pool") || !strings.Contains(out, "warm on "+first.Name) {
		t.Fatalf("first call of a warm-pool agent: %v", m)
	}
	if p := e.onePod(t, "agent-warm"); p.UID != first.UID || p.Annotations["conch.sh/agent"] != "warm" {
		t.Fatalf("the claimed pod: %v", p.ObjectMeta)
	}
	// The pool refills.
	e2etest.Eventually(t, 60*time.Second, func() string {
		ps := e.poolPods(t)
		if len(ps) != 1 || ps[0].UID == first.UID {
			return fmt.Sprintf("%d ready pool pods after the claim", len(ps))
		}
		return ""
	})
	// The claimed pod is the agent's: reused, then idle-deleted like any.
	m = e.execOK(t, "warm", map[string]any{"command": "echo again on $HOSTNAME"})
	if strings.Contains(text(m), "Claimed") || !strings.Contains(text(m), "again on "+first.Name) {
		t.Fatalf("second call: %v", m)
	}
	e.noPod(t, "agent-warm")
	if len(e.poolPods(t)) != 1 {
		t.Fatal("the pool pod went with the idle one")
	}
}

func (e *kubeEnv) testRecreate(t *testing.T) {
	pod := e.onePod(t, "agent-main")
	// The agent "unreach" names a cluster that does not answer: the
	// others are listed all the same, and stderr says why one is missing.
	out, errOut, code := e2etest.RunCLI(t, nil, "sandbox", "list", "--json", "--home", e.home)
	var list []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || !strings.Contains(out, pod.Name) || !strings.Contains(errOut, "cannot reach") {
		t.Fatalf("sandbox list: %d %s %s", code, out, errOut)
	}
	if out, code := e2etest.RunCLIHome(t, e.home, "sandbox", "recreate", "--agent", "main"); code != 0 || !strings.Contains(out, pod.Name) {
		t.Fatalf("recreate: %d %s", code, out)
	}
	e.noPod(t, "agent-main")
	// Conch's own deletion is no loss to report: the next call creates a
	// new pod at once.
	m := e.execOK(t, "main", map[string]any{"command": "echo fresh on $HOSTNAME"})
	if p := e.onePod(t, "agent-main"); p.UID == pod.UID || !strings.Contains(text(m), "fresh on "+p.Name) {
		t.Fatalf("after recreate: %v", m)
	}
}

// testPrune: sandboxes a stopped gateway left behind are pruned once idle
// past their timeout.
func (e *kubeEnv) testPrune(t *testing.T) {
	e.execOK(t, "stale", map[string]any{"command": "true"})
	pod := e.onePod(t, "agent-stale")
	e.g.Stop()
	// The pod outlives the gateway; once idle past 1 s, prune deletes it.
	if _, err := e.c.admin.CoreV1().Pods(e.ns).Get(context.Background(), pod.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Fatal("the pod went with the gateway")
	}
	e2etest.Eventually(t, 30*time.Second, func() string {
		out, code := e2etest.RunCLIHome(t, e.home, "sandbox", "prune")
		if code != 0 || !strings.Contains(out, pod.Name) {
			return fmt.Sprintf("prune: %d %s", code, out)
		}
		return ""
	})
	e.noPod(t, "agent-stale")
	// The warm pool's pod, left by the stopped gateway, goes too once
	// idle past its agent's timeout.
	e2etest.Eventually(t, 30*time.Second, func() string {
		e2etest.RunCLIHome(t, e.home, "sandbox", "prune")
		if l, _ := e.c.admin.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "conch.sh/pool"}); len(l.Items) != 0 {
			return fmt.Sprintf("%d pool pods left", len(l.Items))
		}
		return ""
	})
	if out, code := e2etest.RunCLIHome(t, e.home, "sandbox", "list"); code != 0 || strings.Contains(out, "agent-stale") {
		t.Fatalf("list after prune: %d %s", code, out)
	}
}
