//go:build linux

package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A real Kubernetes API server for the kubernetes backend's tests: etcd
// (Debian's etcd-server) and kube-apiserver (built by
// bench/k8s/build-apiserver.sh) on loopback, with token authentication
// and RBAC. No kubelet, scheduler, controller manager or container runtime
// can run on these machines: kubeletStandIn (below) stands in for the
// scheduler and the kubelet of one test node, and sandboxControllerStandIn
// for the agent-sandbox controller.

// kubeVersion is the kube-apiserver the tests use.
const kubeVersion = "v1.37.2"

// apiserverBinary finds kube-apiserver: $CONCH_KUBE_APISERVER, the cache
// of bench/k8s/build-apiserver.sh, or PATH.
func apiserverBinary() (string, string) {
	if p := os.Getenv("CONCH_KUBE_APISERVER"); p != "" {
		return p, ""
	}
	cache := os.Getenv("CONCH_K8S_CACHE")
	if cache == "" {
		h, _ := os.UserHomeDir()
		cache = filepath.Join(h, ".cache", "conch-k8s")
	}
	if p := filepath.Join(cache, kubeVersion, "kube-apiserver"); isExecutable(p) {
		return p, ""
	}
	if p, err := exec.LookPath("kube-apiserver"); err == nil {
		return p, ""
	}
	return "", "kube-apiserver " + kubeVersion + " not built: run bench/k8s/build-apiserver.sh (about 9 minutes on 2 cores; .ci/run does)"
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// testCluster is a running API server.
type testCluster struct {
	t      *testing.T
	dir    string
	url    string
	admin  kubernetes.Interface
	dyn    dynamic.Interface
	tokens map[string]string // user -> bearer token
}

// startCluster starts etcd and kube-apiserver, or skips the test with the
// reason they cannot run.
func startCluster(t *testing.T) *testCluster {
	t.Helper()
	apiserver, why := apiserverBinary()
	if apiserver == "" {
		t.Skip(why)
	}
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd not installed (apt-get install etcd-server; .ci/run does)")
	}
	dir := t.TempDir()
	c := &testCluster{t: t, dir: dir, tokens: map[string]string{"admin": "admin-" + randHex(8), "conch-gateway": "gw-" + randHex(8), "nobody": "nobody-" + randHex(8),
		"kubelet": "kubelet-" + randHex(8)}}
	cp, pp, ap := e2etest.FreePort(t), e2etest.FreePort(t), e2etest.FreePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", cp)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pp)
	startProc(t, filepath.Join(dir, "etcd.log"), etcd, "--name", "conchtest", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL, "--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer, "--initial-cluster", "conchtest="+peer)

	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	keyFile := filepath.Join(dir, "sa.key")
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	var csv strings.Builder
	for user, tok := range c.tokens {
		group := ""
		switch user {
		case "admin":
			group = `,"system:masters"`
		case "kubelet": // a real node's kubelet (realnode_test.go)
			group = `,"system:masters,system:nodes"`
		}
		fmt.Fprintf(&csv, "%s,%s,%s-uid%s\n", tok, user, user, group)
	}
	os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(csv.String()), 0o600)
	startProc(t, filepath.Join(dir, "apiserver.log"), apiserver, "--etcd-servers", etcdURL,
		"--secure-port", fmt.Sprint(ap), "--bind-address", "127.0.0.1", "--cert-dir", filepath.Join(dir, "certs"),
		"--service-account-key-file", keyFile, "--service-account-signing-key-file", keyFile,
		"--service-account-issuer", "https://kubernetes.default.svc", "--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "RBAC", "--service-cluster-ip-range", "10.96.0.0/16")
	c.url = fmt.Sprintf("https://127.0.0.1:%d", ap)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	e2etest.Eventually(t, 90*time.Second, func() string {
		req, _ := http.NewRequest("GET", c.url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.tokens["admin"])
		resp, err := hc.Do(req)
		if err != nil {
			return "kube-apiserver not up: " + err.Error() + "\n" + tail(filepath.Join(dir, "apiserver.log"))
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Sprintf("kube-apiserver /readyz: %d", resp.StatusCode)
		}
		return ""
	})
	rc := c.restConfig("admin")
	c.admin = kubernetes.NewForConfigOrDie(rc)
	c.dyn = dynamic.NewForConfigOrDie(rc)
	return c
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func tail(p string) string {
	b, _ := os.ReadFile(p)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// startProc runs a server process for the test's lifetime.
func startProc(t *testing.T, log, bin string, args ...string) {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(e2etest.Slow(10 * time.Second)):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
}

func (c *testCluster) restConfig(user string) *rest.Config {
	return &rest.Config{Host: c.url, BearerToken: c.tokens[user], TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 200, Burst: 400}
}

// kubeconfig writes a kubeconfig for user (at server, default the
// cluster's) and returns its path.
func (c *testCluster) kubeconfig(user, server string) string {
	if server == "" {
		server = c.url
	}
	p := filepath.Join(c.dir, "kubeconfig-"+user+"-"+randHex(3))
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: %s
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: %s}
current-context: test
`, server, user, c.tokens[user], user)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// setupNamespace creates ns with the service account of the sandbox pods
// and applies the gateway's Role and ClusterRole from
// docs/kubernetes/rbac.yaml, bound to the user conch-gateway.
func (c *testCluster) setupNamespace(ns string) {
	t := c.t
	ctx := context.Background()
	if _, err := c.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../docs/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if u.Object == nil {
			continue
		}
		switch u.GetKind() {
		case "Role":
			var r rbacv1.Role
			runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r)
			r.Namespace = ns
			if _, err := c.admin.RbacV1().Roles(ns).Create(ctx, &r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			c.admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: ns},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: r.Name},
				Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "conch-gateway"}}}, metav1.CreateOptions{})
		case "ClusterRole":
			var r rbacv1.ClusterRole
			runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r)
			if _, err := c.admin.RbacV1().ClusterRoles().Create(ctx, &r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			c.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r.Name},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: r.Name},
				Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "conch-gateway"}}}, metav1.CreateOptions{})
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sa)
			sa.Namespace = ns
			if _, err := c.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// kubeletStandIn stands in for the scheduler and the kubelet of one node
// (no kubelet or container runtime can run here): it binds the pending
// pods of its namespace to its node, runs each pod's container command as
// a local process with the pod's environment (mount paths replaced by
// local directories, a projected service-account token requested through
// the TokenRequest API as the kubelet does), reports the pod Running,
// Failed or Succeeded, emulates an image pull failure for images under
// registry.invalid/, and finishes the deletion of pods it ran. Images
// under conch-test/hold are never started (a pod that stays Pending).
type kubeletStandIn struct {
	t    *testing.T
	cs   kubernetes.Interface
	ns   string
	node string
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	pods map[string]*standInPod // by UID
}

type standInPod struct {
	name      string
	cmd       *exec.Cmd
	out       *e2etest.LockedBuffer
	mounts    map[string]string // mount path -> local directory
	exited    chan struct{}
	evicted   string
	reported  bool
	pullError bool
	nodeLost  bool // its node went dark: nothing reports on it any more
}

func startKubelet(t *testing.T, c *testCluster, ns string) *kubeletStandIn {
	k := &kubeletStandIn{t: t, cs: c.admin, ns: ns, node: "standin-node", stop: make(chan struct{}), done: make(chan struct{}), pods: map[string]*standInPod{}}
	go k.loop()
	t.Cleanup(k.close)
	return k
}

func (k *kubeletStandIn) close() {
	close(k.stop)
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pods {
		k.kill(p)
	}
}

func (k *kubeletStandIn) kill(p *standInPod) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(e2etest.Slow(10 * time.Second)):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	// The node's supervisors end their sessions on SIGTERM.
	if h := p.mounts["/var/lib/conch"]; h != "" {
		exec.Command("pkill", "-TERM", "-f", "supervise --home "+h).Run()
	}
}

func (k *kubeletStandIn) loop() {
	defer close(k.done)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := k.cs.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{})
		cancel()
		if err != nil {
			continue
		}
		for i := range l.Items {
			k.sync(&l.Items[i])
		}
	}
}

func (k *kubeletStandIn) sync(pod *corev1.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uid := string(pod.UID)
	k.mu.Lock()
	p := k.pods[uid]
	var settled bool
	if p != nil {
		settled = p.pullError || p.evicted != "" || p.reported || p.nodeLost
	}
	k.mu.Unlock()
	switch {
	case pod.DeletionTimestamp != nil:
		if p != nil {
			k.kill(p)
		}
		zero := int64(0)
		k.cs.CoreV1().Pods(k.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	case pod.Spec.NodeName == "":
		// The scheduler's part.
		k.cs.CoreV1().Pods(k.ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: k.node}}, metav1.CreateOptions{})
	case pod.Spec.NodeName != k.node:
	case p == nil:
		k.start(ctx, pod)
	case settled:
	default:
		select {
		case <-p.exited:
			k.finished(ctx, pod, p)
		default:
		}
	}
}

func (k *kubeletStandIn) start(ctx context.Context, pod *corev1.Pod) {
	c := pod.Spec.Containers[0]
	p := &standInPod{name: pod.Name, out: &e2etest.LockedBuffer{}, mounts: map[string]string{}, exited: make(chan struct{})}
	k.mu.Lock()
	k.pods[string(pod.UID)] = p
	k.mu.Unlock()
	if strings.HasPrefix(c.Image, "conch-test/hold") {
		return
	}
	if strings.HasPrefix(c.Image, "registry.invalid/") {
		p.pullError = true
		msg := fmt.Sprintf(`Failed to pull image "%s": rpc error: code = Unknown desc = failed to resolve reference "%s": dial tcp: lookup registry.invalid: no such host`, c.Image, c.Image)
		now := metav1.Now()
		k.cs.CoreV1().Events(k.ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + "-", Namespace: k.ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: k.ns, Name: pod.Name, UID: pod.UID},
			Reason:         "Failed", Message: msg, Type: corev1.EventTypeWarning, FirstTimestamp: now, LastTimestamp: now, Count: 1,
			Source: corev1.EventSource{Component: "kubelet", Host: k.node}}, metav1.CreateOptions{})
		pod.Status.Phase = corev1.PodPending
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: msg}}}}
		k.cs.CoreV1().Pods(k.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return
	}
	// Short paths, as in a real pod (/var/lib/conch): the node's session
	// sockets must fit in a unix socket address.
	root, err := os.MkdirTemp("", "kl")
	if err != nil {
		k.t.Errorf("kubelet stand-in: %v", err)
		return
	}
	k.t.Cleanup(func() { os.RemoveAll(root) })
	vols := map[string]string{}
	for i, v := range pod.Spec.Volumes {
		d := filepath.Join(root, fmt.Sprint(i))
		vols[v.Name] = d
		os.MkdirAll(d, 0o700)
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if sat := src.ServiceAccountToken; sat != nil {
					// The kubelet's part: a token bound to this pod.
					tr, err := k.cs.CoreV1().ServiceAccounts(k.ns).CreateToken(ctx, pod.Spec.ServiceAccountName, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
						Audiences: []string{sat.Audience}, ExpirationSeconds: sat.ExpirationSeconds,
						BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
					if err != nil {
						k.t.Logf("kubelet stand-in: token for %s: %v", pod.Name, err)
						continue
					}
					os.WriteFile(filepath.Join(d, sat.Path), []byte(tr.Status.Token), 0o600)
				}
			}
		}
	}
	for _, m := range c.VolumeMounts {
		p.mounts[m.MountPath] = vols[m.Name]
	}
	argv := make([]string, 0, len(c.Command)+len(c.Args))
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, p.subst(a))
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	// The image's PATH is this machine's.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOSTNAME=" + pod.Name, "HOME=" + p.subst("/workspace")}
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+p.subst(e.Value))
	}
	cmd.Dir = p.subst(c.WorkingDir)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		p.out.Write([]byte(err.Error()))
		close(p.exited)
		return
	}
	p.cmd = cmd
	go func() { cmd.Wait(); close(p.exited) }()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.HostIP, pod.Status.StartTime = "127.0.0.1", "127.0.0.1", &now
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, Ready: true, Started: &[]bool{true}[0],
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	k.cs.CoreV1().Pods(k.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// subst maps a path inside the container to the local directory of its
// mount.
func (p *standInPod) subst(s string) string {
	keys := make([]string, 0, len(p.mounts))
	for m := range p.mounts {
		keys = append(keys, m)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, m := range keys {
		if s == m || strings.HasPrefix(s, m+"/") {
			return p.mounts[m] + strings.TrimPrefix(s, m)
		}
	}
	return s
}

// finished reports a container that exited (with its last output as the
// termination message, FallbackToLogsOnError).
func (k *kubeletStandIn) finished(ctx context.Context, pod *corev1.Pod, p *standInPod) {
	p.reported = true
	code := p.cmd.ProcessState.ExitCode()
	pod.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: "Error", Message: lastN(p.out.String(), 400)}}}}
	k.cs.CoreV1().Pods(k.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

const standInEviction = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 20Mi."

func (k *kubeletStandIn) evictReason() string { return "low on resource: memory" }

func (k *kubeletStandIn) nodeName() string { return k.node }

func (k *kubeletStandIn) nodeBack() {}

func (k *kubeletStandIn) workdir(name string) string { return k.workspace(name) }

// evict does what a kubelet under node pressure does: it kills the pod's
// container, marks the pod Failed with reason Evicted and records an
// Evicted event.
func (k *kubeletStandIn) evict(name string) {
	msg := standInEviction
	ctx := context.Background()
	pod, err := k.cs.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	k.mu.Lock()
	p := k.pods[string(pod.UID)]
	k.mu.Unlock()
	if p == nil {
		k.t.Fatalf("kubelet stand-in does not run pod %s", name)
	}
	k.mu.Lock()
	p.evicted = msg
	k.mu.Unlock()
	k.kill(p)
	now := metav1.Now()
	k.cs.CoreV1().Events(k.ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: k.ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: k.ns, Name: name, UID: pod.UID},
		Reason:         "Evicted", Message: msg, Type: corev1.EventTypeWarning, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source: corev1.EventSource{Component: "kubelet", Host: k.node}}, metav1.CreateOptions{})
	pod.Status.Phase, pod.Status.Reason, pod.Status.Message = corev1.PodFailed, "Evicted", msg
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Evicted"}}}}
	if _, err := k.cs.CoreV1().Pods(k.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

// nodeNotReady plays a node that stops reporting to the control plane:
// its kubelet says nothing more about the pod, and, as the node lifecycle
// controller does for such a node, the pod is marked not Ready and a
// NodeNotReady event recorded. The pod's container keeps running (the
// node may only be cut off from the control plane); darken kills it.
func (k *kubeletStandIn) nodeNotReady(name string) {
	ctx := context.Background()
	pod, err := k.cs.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	k.mu.Lock()
	p := k.pods[string(pod.UID)]
	if p != nil {
		p.nodeLost = true
	}
	k.mu.Unlock()
	if p == nil {
		k.t.Fatalf("kubelet stand-in does not run pod %s", name)
	}
	markNotReady(k.t, k.cs, k.ns, pod)
}

// markNotReady plays the node lifecycle controller for a node that
// stopped reporting: pod is marked not Ready, with a NodeNotReady event.
func markNotReady(t *testing.T, cs kubernetes.Interface, ns string, pod *corev1.Pod) {
	ctx := context.Background()
	now := metav1.Now()
	cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + "-", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID},
		Reason:         "NodeNotReady", Message: "Node is not ready", Type: corev1.EventTypeWarning, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source: corev1.EventSource{Component: "node-controller"}}, metav1.CreateOptions{})
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			pod.Status.Conditions[i].Status, pod.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, now
		}
	}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// darken stops what runs in pod name, as when its node's machine is
// gone; nothing is reported to the API server.
func (k *kubeletStandIn) darken(name string) {
	k.mu.Lock()
	var p *standInPod
	for _, x := range k.pods {
		if x.name == name {
			p = x
		}
	}
	k.mu.Unlock()
	if p == nil {
		k.t.Fatalf("kubelet stand-in does not run pod %s", name)
	}
	k.kill(p)
}

// workspace is the local directory standing in for pod name's /workspace.
func (k *kubeletStandIn) workspace(name string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pods {
		if p.name == name {
			return p.mounts["/workspace"]
		}
	}
	return ""
}

// sandboxGVR is agent-sandbox's Sandbox resource.
var sandboxGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1alpha1", Resource: "sandboxes"}

// installSandboxCRD installs a CRD for the Sandbox resource with only the
// v1alpha1 fields conch uses. It stands in for agent-sandbox's own CRD,
// which is not available here.
func (c *testCluster) installSandboxCRD() {
	t := c.t
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "sandboxes.agents.x-k8s.io"},
		"spec": map[string]any{
			"group": "agents.x-k8s.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "sandboxes", "singular": "sandbox", "kind": "Sandbox", "listKind": "SandboxList"},
			"versions": []any{map[string]any{"name": "v1alpha1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{
						"podTemplate":  map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
						"replicas":     map[string]any{"type": "integer"},
						"shutdownTime": map[string]any{"type": "string", "format": "date-time"},
					}},
					"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
				}}}}},
		}}}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := c.dyn.Resource(crdGVR).Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, 30*time.Second, func() string {
		if _, err := c.dyn.Resource(sandboxGVR).Namespace("default").List(context.Background(), metav1.ListOptions{}); err != nil {
			return "Sandbox resource not served yet: " + err.Error()
		}
		return ""
	})
}

// sandboxControllerStandIn plays the agent-sandbox controller's part: for
// every Sandbox it creates the pod of spec.podTemplate (named as the
// Sandbox), marks the Sandbox Ready when the pod runs, and deletes the
// pod of a Sandbox that is gone (no garbage collector runs here either).
func startSandboxController(t *testing.T, c *testCluster, ns string) {
	everyTick(t, func(ctx context.Context) {
		sl, err := c.dyn.Resource(sandboxGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		pl, err2 := c.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || err2 != nil {
			return
		}
		want := map[string]bool{}
		for _, s := range sl.Items {
			want[s.GetName()] = true
		}
		have := map[string]*corev1.Pod{}
		for i, p := range pl.Items {
			have[p.Name] = &pl.Items[i]
			if len(p.OwnerReferences) == 1 && p.OwnerReferences[0].Kind == "Sandbox" && !want[p.Name] && p.DeletionTimestamp == nil {
				c.admin.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
			}
		}
		for _, s := range sl.Items {
			p := have[s.GetName()]
			if p == nil && s.GetDeletionTimestamp() == nil {
				tmpl, _, _ := unstructured.NestedMap(s.Object, "spec", "podTemplate")
				var pt corev1.PodTemplateSpec
				runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt)
				yes := true
				pod := &corev1.Pod{ObjectMeta: pt.ObjectMeta, Spec: pt.Spec}
				pod.Name, pod.Namespace = s.GetName(), ns
				pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "agents.x-k8s.io/v1alpha1", Kind: "Sandbox", Name: s.GetName(), UID: s.GetUID(), Controller: &yes}}
				c.admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				continue
			}
			if p != nil && p.Status.Phase == corev1.PodRunning {
				conds, _, _ := unstructured.NestedSlice(s.Object, "status", "conditions")
				if len(conds) == 0 {
					unstructured.SetNestedSlice(s.Object, []any{map[string]any{"type": "Ready", "status": "True", "reason": "PodRunning",
						"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}, "status", "conditions")
					c.dyn.Resource(sandboxGVR).Namespace(ns).UpdateStatus(ctx, &s, metav1.UpdateOptions{})
				}
			}
		}
	})
}

// everyTick runs f every 50 ms, each time with a 10 s deadline, until
// the test ends: the loop of the parts of a cluster the tests play.
func everyTick(t *testing.T, f func(ctx context.Context)) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			f(ctx)
			cancel()
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}
