//go:build linux

package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A real node for the kubernetes backend's tests: containerd and runc
// from Debian, the kubelet built beside kube-apiserver by
// bench/k8s/build-apiserver.sh, the CNI bridge plugin, and images built
// here (no registry is reachable). Two parts of a cluster still do not run
// and the harness plays them, named where they act: the scheduler (pods
// are bound to the one node) and the node lifecycle controller (a node
// that stops reporting has its pods marked not Ready).
//
// The kubelet changes machine-wide settings (sysctls) and leaves mounts
// behind; the harness records them before it starts anything and
// restores and checks them on every way out of the test.

const (
	realNodeName = "conch-node"
	bridgeName   = "conchk0"
	// The pods' network: a bridge on this machine, with the gateway of
	// the tests listening on its address. Nothing leaves the machine.
	bridgeNet  = "10.244.77.0/24"
	bridgeAddr = "10.244.77.1"
	// Image names as the kubelet normalises them.
	sandboxImage = "conch-test/sandbox:1"
	pauseImage   = "conch-test/pause:1"
	// A registry that cannot serve: containerd's mirror of it is a port
	// on loopback that refuses (a pull failure that never leaves the
	// machine).
	refusedRegistry = "registry.invalid"
	// The node's labels: a pod selecting others stays Pending.
	nodeLabels = "pool=sandboxes"
)

// kubeletSysctls are the settings the kubelet sets at start
// (setupKernelTunables) plus the one the CNI bridge plugin sets.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
}

// realNode is a kubelet with its container runtime.
type realNode struct {
	t       *testing.T
	c       *testCluster
	ns      string
	dir     string
	sock    string
	kubelet *exec.Cmd
	mu      sync.Mutex
	stopped bool // the kubelet is frozen (nodeNotReady)
}

// realNodeMissing says why no real node can run here, or "".
func realNodeMissing(apiserver string) (kubelet, why string) {
	if v := os.Getenv("CONCH_KUBE_REAL_NODE"); v == "0" {
		return "", "CONCH_KUBE_REAL_NODE=0"
	}
	if os.Geteuid() != 0 {
		return "", "a real kubelet needs root"
	}
	kubelet = os.Getenv("CONCH_KUBE_KUBELET")
	if kubelet == "" && apiserver != "" {
		kubelet = filepath.Join(filepath.Dir(apiserver), "kubelet")
	}
	if !isExecutable(kubelet) {
		if p, err := exec.LookPath("kubelet"); err == nil {
			kubelet = p
		} else {
			return "", "no kubelet (bench/k8s/build-apiserver.sh builds it beside kube-apiserver)"
		}
	}
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", tool + " not installed (apt-get install containerd runc iproute2; .ci/run does)"
		}
	}
	for _, p := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"} {
		if !isExecutable(p) {
			return "", p + " not installed (apt-get install containernetworking-plugins; .ci/run does)"
		}
	}
	if !isExecutable("/bin/busybox") {
		return "", "/bin/busybox not installed (apt-get install busybox-static; .ci/run does): the sandbox image's shell"
	}
	return kubelet, ""
}

// leftDirs are where the kubelet and CNI write outside the test's own
// directory: the kubelet's container log links, CNI's result cache.
var leftDirs = []string{"/var/log/pods", "/var/log/containers", "/var/lib/cni/results", "/var/lib/cni/networks", "/var/lib/cni/cache"}

// machineState is what the test must leave as it found it.
type machineState struct {
	sysctls map[string]string
	mounts  map[string]bool
	links   map[string]bool
	files   map[string]bool // entries of leftDirs
}

func readMachineState() machineState {
	s := machineState{sysctls: map[string]string{}, mounts: map[string]bool{}, links: map[string]bool{}, files: map[string]bool{}}
	for _, d := range leftDirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			s.files[filepath.Join(d, e.Name())] = true
		}
	}
	for _, k := range kubeletSysctls {
		b, _ := os.ReadFile("/proc/sys/" + k)
		s.sysctls[k] = strings.TrimSpace(string(b))
	}
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			s.mounts[f[4]] = true
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		s.links[i.Name] = true
	}
	return s
}

// diff lists how now differs from s.
func (s machineState) diff(now machineState) []string {
	var d []string
	for k, v := range s.sysctls {
		if now.sysctls[k] != v {
			d = append(d, fmt.Sprintf("sysctl %s: %s, was %s", strings.ReplaceAll(k, "/", "."), now.sysctls[k], v))
		}
	}
	for m := range now.mounts {
		if !s.mounts[m] {
			d = append(d, "mount left: "+m)
		}
	}
	for l := range now.links {
		if !s.links[l] {
			d = append(d, "network link left: "+l)
		}
	}
	for f := range now.files {
		if !s.files[f] {
			d = append(d, "file left: "+f)
		}
	}
	sort.Strings(d)
	return d
}

// restore puts back what now changed from s, under dir.
func (s machineState) restore(dir string) {
	for k, v := range s.sysctls {
		os.WriteFile("/proc/sys/"+k, []byte(v), 0o644)
	}
	now := readMachineState()
	var left []string
	for m := range now.mounts {
		if !s.mounts[m] {
			left = append(left, m)
		}
	}
	// Deepest first.
	sort.Slice(left, func(i, j int) bool { return len(left[i]) > len(left[j]) })
	for _, m := range left {
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	for l := range now.links {
		if !s.links[l] && (l == bridgeName || strings.HasPrefix(l, "veth")) {
			exec.Command("ip", "link", "del", l).Run()
		}
	}
	for f := range now.files {
		if !s.files[f] {
			os.RemoveAll(f)
		}
	}
}

// startRealNode starts containerd and the kubelet as node conch-node of
// c, or returns why it cannot.
func startRealNode(t *testing.T, c *testCluster, ns, kubelet string) *realNode {
	t.Helper()
	// One real node on the machine at a time: the kubelet's sysctls and
	// the bridge are the machine's, and each run restores and checks
	// them (go test and go test -race of the same tree may run at once).
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "conch-kube-realnode.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() }) // registered first: released last
	before := readMachineState()
	n := &realNode{t: t, c: c, ns: ns}
	// Short: unix socket paths of containerd's shims and of the node's
	// sessions live under it.
	dir, err := os.MkdirTemp("", "crn")
	if err != nil {
		t.Fatal(err)
	}
	n.dir = dir
	cgroupRoot := "/conch-test-" + filepath.Base(dir)
	// Registered first: runs last, after the kubelet and containerd stop.
	t.Cleanup(func() {
		n.killPods(cgroupRoot)
		before.restore(dir)
		os.RemoveAll(dir)
		if d := before.diff(readMachineState()); len(d) > 0 {
			t.Errorf("the machine is not as the test found it:\n%s", strings.Join(d, "\n"))
		}
	})
	exec.Command("ip", "link", "del", bridgeName).Run() // a crashed run's
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", bridgeAddr + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	refused := e2etest.FreePort(t)
	n.sock = filepath.Join(dir, "containerd.sock")
	os.MkdirAll(filepath.Join(dir, "cni"), 0o700)
	os.WriteFile(filepath.Join(dir, "cni", "10-conch.conflist"), []byte(fmt.Sprintf(`{
  "cniVersion": "0.4.0", "name": "conch-test",
  "plugins": [{"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "dataDir": %q}}]
}`, bridgeName, bridgeNet, bridgeAddr, filepath.Join(dir, "ipam"))), 0o600)
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/%[6]s"
  # root's bounding set lacks CAP_SYS_RESOURCE here
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."%[8]s"]
    endpoint = ["http://127.0.0.1:%[9]d"]
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), n.sock, n.sock+".ttrpc", filepath.Join(dir, "opt"),
		pauseImage, filepath.Join(dir, "cni"), refusedRegistry, refused)
	os.WriteFile(filepath.Join(dir, "containerd.toml"), []byte(cfg), 0o600)
	startProc(t, filepath.Join(dir, "containerd.log"), "containerd", "--config", filepath.Join(dir, "containerd.toml"))
	e2etest.Eventually(t, 60*time.Second, func() string {
		if out, err := n.ctr("version").CombinedOutput(); err != nil {
			return fmt.Sprintf("containerd not up: %v %s\n%s", err, out, tail(filepath.Join(dir, "containerd.log")))
		}
		return ""
	})
	n.importImages()

	// The kubelet's credentials: a user in system:nodes and, since no
	// Node authorizer runs here, system:masters.
	kc := c.kubeconfig("kubelet", "")
	cfgFile := filepath.Join(dir, "kubelet.yaml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %q
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://%s
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
failSwapOn: false
protectKernelDefaults: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
evictionPressureTransitionPeriod: 5s
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
serializeImagePulls: false
resolvConf: ""
# No cluster DNS runs; pods get this address and never use it (they
# dial the gateway by IP). Without it every pod has a MissingClusterDNS
# event.
clusterDNS: ["10.96.0.10"]
clusterDomain: cluster.local
localStorageCapacityIsolation: true
`, cgroupRoot, n.sock, e2etest.FreePort(t), e2etest.FreePort(t))), 0o600)
	// cgroupRoot must exist in every v1 hierarchy.
	for _, h := range cgroupHierarchies() {
		os.MkdirAll(filepath.Join(h, cgroupRoot), 0o755)
	}
	f, err := os.Create(filepath.Join(dir, "kubelet.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubelet, "--config", cfgFile, "--kubeconfig", kc, "--root-dir", filepath.Join(dir, "kubelet"),
		"--cert-dir", filepath.Join(dir, "kubelet-pki"), "--hostname-override", realNodeName, "--node-ip", bridgeAddr,
		"--node-labels", nodeLabels, "--v", "1")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.kubelet = cmd
	done := make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(e2etest.Slow(10 * time.Second)):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	e2etest.Eventually(t, 120*time.Second, func() string {
		node, err := c.admin.CoreV1().Nodes().Get(context.Background(), realNodeName, metav1.GetOptions{})
		if err != nil {
			return "node not registered: " + err.Error() + "\n" + tail(filepath.Join(dir, "kubelet.log"))
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return ""
			}
		}
		return fmt.Sprintf("node not Ready: %v\n%s", node.Status.Conditions, tail(filepath.Join(dir, "kubelet.log")))
	})
	n.schedule()
	return n
}

func cgroupHierarchies() []string {
	var out []string
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	if len(out) == 0 {
		out = []string{"/sys/fs/cgroup"}
	}
	return out
}

// killPods ends whatever the kubelet left running (containers outlive
// containerd and the kubelet: their shims are their parents) and removes
// its cgroups.
func (n *realNode) killPods(cgroupRoot string) {
	for pass := 0; pass < 20; pass++ {
		found := false
		for _, h := range cgroupHierarchies() {
			filepath.Walk(filepath.Join(h, cgroupRoot), func(p string, info os.FileInfo, err error) error {
				if err != nil || info.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					var pid int
					fmt.Sscan(f, &pid)
					if pid > 0 {
						found = true
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
		exec.Command("pkill", "-KILL", "-f", "containerd-shim-runc-v2 .*-address "+regexp.QuoteMeta(n.sock)).Run()
		if !found {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, cgroupRoot)
		var dirs []string
		filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			os.Remove(dirs[i])
		}
	}
}

func (n *realNode) ctr(args ...string) *exec.Cmd {
	return exec.Command("ctr", append([]string{"--address", n.sock, "--namespace", "k8s.io"}, args...)...)
}

// importImages builds the sandbox image (busybox as its shell and tools,
// the conch binary and the libraries it links) and the pause image, and
// imports them into containerd.
func (n *realNode) importImages() {
	t := n.t
	files := map[string]string{"/bin/busybox": "/bin/busybox", "/conch": e2etest.ConchBin}
	for _, bin := range []string{"/bin/busybox", e2etest.ConchBin} {
		for _, lib := range sharedLibs(t, bin) {
			files[lib] = lib
		}
	}
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" {
			links["/bin/"+a] = "busybox"
		}
	}
	layer := buildLayer(t, files, links)
	for name, entry := range map[string][]string{sandboxImage: {"/bin/sh"}, pauseImage: {"/bin/sleep", "2147483647"}} {
		archive := filepath.Join(n.dir, strings.NewReplacer("/", "_", ":", "_").Replace(name)+".tar")
		writeOCIArchive(t, archive, "docker.io/"+name, layer, entry)
		if out, err := n.ctr("images", "import", archive).CombinedOutput(); err != nil {
			t.Fatalf("ctr images import %s: %v %s", name, err, out)
		}
	}
}

// sharedLibs lists the libraries bin loads (and its interpreter), as
// ldd prints them.
func sharedLibs(t *testing.T, bin string) []string {
	out, _ := exec.Command("ldd", bin).CombinedOutput()
	var libs []string
	for _, l := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
			}
		}
	}
	return libs
}

// buildLayer is an uncompressed image layer holding files (path in the
// image -> file here) and symlinks (path -> target).
func buildLayer(t *testing.T, files, links map[string]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	mkdirs := func(p string) {
		var chain []string
		for d := filepath.Dir(p); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			chain = append(chain, d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			dirs[chain[i]] = true
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(chain[i], "/") + "/", Mode: 0o755})
		}
	}
	for _, d := range []string{"/tmp/", "/etc/", "/workspace/", "/var/lib/conch/"} {
		mkdirs(d + "x")
	}
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777})
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		b, err := os.ReadFile(files[p])
		if err != nil {
			t.Fatal(err)
		}
		mkdirs(p)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: 0o755, Size: int64(len(b))})
		tw.Write(b)
	}
	for _, etc := range []struct{ name, body string }{
		{"etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"},
		{"etc/group", "root:x:0:\n"},
	} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: etc.name, Mode: 0o644, Size: int64(len(etc.body))})
		tw.Write([]byte(etc.body))
	}
	names = names[:0]
	for p := range links {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if _, ok := files[p]; ok {
			continue
		}
		mkdirs(p)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(p, "/"), Linkname: links[p], Mode: 0o777})
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeOCIArchive writes an OCI image layout, as a tar, of one image
// named ref with layer and entrypoint.
func writeOCIArchive(t *testing.T, path, ref string, layer []byte, entry []string) {
	blobs := map[string][]byte{}
	put := func(b []byte) (string, int) {
		d := fmt.Sprintf("sha256:%x", sha256.Sum256(b))
		blobs[d] = b
		return d, len(b)
	}
	ld, ls := put(layer)
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": entry, "Env": []string{"PATH=/bin"}, "WorkingDir": "/"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{ld}},
	})
	cd, cs := put(cfg)
	man, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": ls}},
	})
	md, ms := put(man)
	tag := ref[strings.LastIndex(ref, ":")+1:]
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ms,
			"annotations": map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag}}},
	})
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(name string, b []byte) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b))})
		tw.Write(b)
	}
	add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	add("index.json", index)
	digests := make([]string, 0, len(blobs))
	for d := range blobs {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	for _, d := range digests {
		add("blobs/sha256/"+strings.TrimPrefix(d, "sha256:"), blobs[d])
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// schedule plays the scheduler: every pending pod of the namespace whose
// node selector the node's labels satisfy is bound to the node; the
// others stay Pending, as unschedulable.
func (n *realNode) schedule() {
	everyTick(n.t, func(ctx context.Context) {
		l, err := n.c.admin.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
		if err != nil {
			return
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && schedulable(p) {
				n.c.admin.CoreV1().Pods(n.ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
					Target: corev1.ObjectReference{Kind: "Node", Name: realNodeName}}, metav1.CreateOptions{})
			}
		}
	})
}

func schedulable(p corev1.Pod) bool {
	k, v, _ := strings.Cut(nodeLabels, "=")
	for sk, sv := range p.Spec.NodeSelector {
		if sk != k || sv != v {
			return false
		}
	}
	return true
}

func (n *realNode) pod(name string) *corev1.Pod {
	p, err := n.c.admin.CoreV1().Pods(n.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return p
}

// workspace is where pod name's /workspace (an emptyDir) is on this
// machine.
func (n *realNode) workspace(name string) string {
	return filepath.Join(n.dir, "kubelet", "pods", string(n.pod(name).UID), "volumes", "kubernetes.io~empty-dir", "workspace")
}

// evict fills pod name's workspace past its ephemeral-storage limit; the
// kubelet's eviction manager evicts it.
func (n *realNode) evict(name string) {
	f, err := os.Create(filepath.Join(n.workspace(name), "fill"))
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := 0; i < 48; i++ {
		f.Write(chunk)
	}
}

// The kubelet leaves such a pod Succeeded (conch node exits 0 on
// SIGTERM): only its Evicted event says why it stopped.
func (n *realNode) evictReason() string {
	return "evicted by its node: Pod ephemeral local storage usage exceeds"
}

func (n *realNode) workdir(string) string { return "/workspace" }

// nodeNotReady freezes the kubelet, so that nothing reports on its pods
// any more, and plays the node lifecycle controller (not running here):
// the pod is marked not Ready with a NodeNotReady event. The pod's
// container keeps running; darken kills it. The kubelet thaws when the
// test ends.
func (n *realNode) nodeNotReady(name string) {
	syscall.Kill(-n.kubelet.Process.Pid, syscall.SIGSTOP)
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	markNotReady(n.t, n.c.admin, n.ns, n.pod(name))
}

// nodeBack thaws a frozen kubelet.
func (n *realNode) nodeBack() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		syscall.Kill(-n.kubelet.Process.Pid, syscall.SIGCONT)
		n.stopped = false
	}
}

// darken kills what runs in pod name, as when its machine is gone; the
// frozen kubelet reports nothing.
func (n *realNode) darken(name string) {
	uid := string(n.pod(name).UID)
	for _, h := range cgroupHierarchies() {
		filepath.Walk(h, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.Name() != "cgroup.procs" || !strings.Contains(p, strings.ReplaceAll(uid, "-", "_")) && !strings.Contains(p, uid) {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				var pid int
				fmt.Sscan(f, &pid)
				if pid > 0 {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

func (n *realNode) nodeName() string { return realNodeName }
