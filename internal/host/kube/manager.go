package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host"
	nodehub "github.com/conchsh/conch/internal/node/hub"
	"github.com/conchsh/conch/internal/node/port"
)

// Manager is the kubernetes backend of one gateway. It is safe for
// concurrent use.
type Manager struct {
	hub  *nodehub.Hub
	home string
	log  *slog.Logger

	gwMu sync.Mutex // guards gw; held over the file write of gatewayID only
	gw   string     // this home's gateway id ("" until the first pod)

	mu     sync.Mutex
	scopes map[string]*scope // by namespace/scope
	pods   map[string]*cluster
	pools  map[string]*pool      // warm pools, by poolKey
	cfg    func() *config.Config // the warm pools' configuration (nil: none yet)
	stop   chan struct{}
	done   chan struct{}
	pdone  chan struct{} // the pooler's
	fill   chan struct{} // wakes the pooler
	once   sync.Once
}

// scope is the sandbox of one scope (agent-<id> or shared) in one
// namespace.
type scope struct {
	mu sync.Mutex // serialises Ensure of the scope

	// Guarded by Manager.mu:
	cl       *cluster
	ns, name string
	kind     string // Pod | Sandbox
	uid      string
	hash     string // of its join token
	nodeID   string
	lastUse  time.Time
	patched  time.Time // last-used annotation written
	idle     time.Duration
	lost     string        // why the pod went away (reported by the next call)
	grace    time.Duration // sandbox.kubernetes.nodeLostGrace
	watching context.CancelFunc
	ours     bool // conch deleted it (idle, recreate): not a loss to report
}

var _ host.PodSandboxes = (*Manager)(nil)

// New returns the backend of the gateway on home, pairing through hub.
func New(home string, hub *nodehub.Hub, log *slog.Logger) (*Manager, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The gateway id is written when the first pod is made, not here: a
	// home that never configures kubernetes never writes a kubernetes file
	// (and a full disk at start is not reported as a kubernetes failure).
	m := &Manager{hub: hub, home: home, log: log, scopes: map[string]*scope{}, pods: map[string]*cluster{},
		pools: map[string]*pool{}, stop: make(chan struct{}), done: make(chan struct{}), pdone: make(chan struct{}), fill: make(chan struct{}, 1)}
	hub.SetPodVerifier(m.verify)
	go m.reaper()
	go m.pooler()
	return m, nil
}

// Close stops the idle reaper and the pod watches (the pods stay).
func (m *Manager) Close() {
	m.once.Do(func() { close(m.stop) })
	<-m.done
	<-m.pdone
	m.mu.Lock()
	for _, s := range m.scopes {
		if s.watching != nil {
			s.watching()
		}
	}
	for _, p := range m.pools {
		for _, s := range p.members {
			if s.watching != nil {
				s.watching()
			}
		}
	}
	m.mu.Unlock()
}

// GatewayID is the id that labels this home's sandboxes
// (sandboxes/kube-gateway-id), so that gateways sharing a namespace keep
// to their own.
func GatewayID(home string) (string, error) {
	p := filepath.Join(home, "sandboxes", "kube-gateway-id")
	if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) == 12 {
		return strings.TrimSpace(string(b)), nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	b := make([]byte, 6)
	rand.Read(b)
	id := hex.EncodeToString(b)
	err := fsutil.CreateFile(p, []byte(id+"\n"), 0o600)
	if errors.Is(err, os.ErrExist) {
		return GatewayID(home) // another process made it first
	}
	return id, err
}

// gatewayID returns this home's gateway id (GatewayID), made on first
// use; a failure is retried at the next use.
func (m *Manager) gatewayID() (string, error) {
	m.gwMu.Lock()
	defer m.gwMu.Unlock()
	if m.gw == "" {
		gw, err := GatewayID(m.home)
		if err != nil {
			return "", fmt.Errorf("write this gateway's id for its sandbox pods (sandboxes/kube-gateway-id): %w", err)
		}
		m.gw = gw
	}
	return m.gw, nil
}

func (m *Manager) scopeOf(key string) *scope {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.scopes[key]
	if s == nil {
		s = &scope{}
		m.scopes[key] = s
	}
	return s
}

// Ensure returns the node of agent's sandbox pod (engine.PodSandboxes).
func (m *Manager) Ensure(ctx context.Context, agent string, sb config.SandboxSettings, progress func(string)) (port.Ref, error) {
	cl, err := clusterFor(sb.Kube)
	if err != nil {
		return port.Ref{}, err
	}
	ns := cl.namespace(sb.Kube)
	s := m.scopeOf(ns + "/" + sb.Scope)
	s.mu.Lock()
	defer s.mu.Unlock()

	m.mu.Lock()
	lost, hash, nodeID := s.lost, s.hash, s.nodeID
	s.lost = ""
	s.grace = sb.Kube.NodeLostGrace
	m.mu.Unlock()
	if lost != "" {
		return port.Ref{}, fmt.Errorf("%s; its files are gone, and the next call creates a new sandbox pod", lost)
	}
	if nodeID == "" {
		// A pod paired before a gateway restart is adopted.
		hash, nodeID = m.adopt(ctx, cl, s, ns, sb)
	}
	if nodeID != "" {
		if ref, ok := m.ready(hash); ok {
			m.touch(ctx, s, sb.IdleTimeout)
			return ref, nil
		}
		// Paired but not connected now: wait for its reconnection, unless
		// the pod is gone.
		ref, err := m.await(ctx, cl, s, sb, nil)
		if err == nil {
			m.touch(ctx, s, sb.IdleTimeout)
			return ref, nil
		}
		var pg *podGone
		if !errors.As(err, &pg) || !m.settle(ctx, s, hash) {
			return port.Ref{}, err
		}
		// The pod's watch saw its end while this call waited: a loss is
		// reported once, conch's own deletion (recreate, prune) is not.
		m.mu.Lock()
		lost = s.lost
		s.lost = ""
		m.mu.Unlock()
		if lost != "" {
			return port.Ref{}, fmt.Errorf("%s; its files are gone, and the next call creates a new sandbox pod", lost)
		}
	}
	if ref, ok := m.claim(ctx, cl, s, ns, agent, sb, progress); ok {
		return ref, nil
	}
	return m.create(ctx, cl, s, ns, agent, sb, progress, "")
}

// ready returns the node paired with invite hash when it is connected.
func (m *Manager) ready(hash string) (port.Ref, bool) {
	p, found, connected := m.hub.PodNode(hash)
	if !found || !connected {
		return port.Ref{}, false
	}
	return port.Ref{ID: p.NodeID, Name: p.Name, Caps: p.Caps}, true
}

// adopt takes over the paired pod of scope left by an earlier run of the
// gateway, when it still exists.
func (m *Manager) adopt(ctx context.Context, cl *cluster, s *scope, ns string, sb config.SandboxSettings) (string, string) {
	for _, p := range m.hub.PodNodes() {
		if p.Pod.Namespace != ns || p.Pod.Scope != sb.Scope {
			continue
		}
		cctx, cancel := ctxTimeout(ctx)
		pod, err := cl.pods(ns).Get(cctx, p.Pod.Name, metav1.GetOptions{})
		cancel()
		if err != nil || string(pod.UID) != p.Pod.UID || pod.DeletionTimestamp != nil || podFailure(pod) != "" {
			if err == nil || apierrors.IsNotFound(err) {
				m.hub.DropPod(p.NodeID, p.InviteHash, "sandbox pod "+ns+"/"+p.Pod.Name+" is gone")
			}
			continue
		}
		kind := "Pod"
		if pod.Labels["conch.sh/kind"] == "Sandbox" {
			kind = "Sandbox"
		}
		m.mu.Lock()
		s.cl, s.ns, s.name, s.kind, s.uid, s.hash, s.nodeID, s.lastUse, s.idle = cl, ns, p.Pod.Name, kind, p.Pod.UID, p.InviteHash, p.NodeID, time.Now(), sb.IdleTimeout
		m.mu.Unlock()
		m.watch(s)
		return p.InviteHash, p.NodeID
	}
	return "", ""
}

// create makes a new sandbox pod for the scope and waits for it to pair;
// with pool set, a pod of that warm pool (a plain pod, no agent's yet).
func (m *Manager) create(ctx context.Context, cl *cluster, s *scope, ns, agent string, sb config.SandboxSettings, progress func(string), pool string) (port.Ref, error) {
	k := sb.Kube
	name := podName(sb.Scope)
	if pool != "" {
		name = podName("pool")
		k.SandboxCRD = "never"
	}
	useCRD := false
	switch k.SandboxCRD {
	case "always":
		ok, err := cl.hasSandboxCRD()
		if err != nil {
			return port.Ref{}, err
		}
		if !ok {
			return port.Ref{}, fmt.Errorf("sandbox.kubernetes.sandboxCrd is always, but the cluster at %s does not serve %s sandboxes (is agent-sandbox installed?)", cl.host, sandboxGV)
		}
		useCRD = true
	case "auto":
		ok, err := cl.hasSandboxCRD()
		if err != nil {
			return port.Ref{}, err
		}
		useCRD = ok
	}
	kind := "Pod"
	if useCRD {
		kind = "Sandbox"
	}
	sa := k.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	k.ServiceAccountName = sa
	gw, err := m.gatewayID()
	if err != nil {
		return port.Ref{}, err
	}
	progress(fmt.Sprintf("Waiting for sandbox pod %s/%s (%s, image %s) to start and connect, up to %s…", ns, name, strings.ToLower(kind), k.Image, k.StartupTimeout))
	tok, hash, err := m.hub.CreatePodInvite(nodehub.PodBinding{Namespace: ns, Name: name, ServiceAccount: sa, Scope: sb.Scope,
		Kind: kind, Kubeconfig: k.Kubeconfig, Context: k.Context, Pool: pool}, k.StartupTimeout+time.Minute)
	if err != nil {
		return port.Ref{}, fmt.Errorf("mint the sandbox pod's join token: %v", err)
	}
	spec, err := podSpec(k, sb.Env, name, tok)
	if err != nil {
		m.hub.DropPod("", hash, "")
		return port.Ref{}, err
	}
	if len(k.NetworkPolicy) > 0 {
		if err := cl.applyNetworkPolicy(ctx, ns, gw, k.NetworkPolicy); err != nil {
			m.hub.DropPod("", hash, "")
			return port.Ref{}, err
		}
	}
	now := time.Now()
	meta := metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{LabelManaged: "conch", LabelGateway: gw, LabelScope: labelValue(sb.Scope), "conch.sh/kind": kind},
		Annotations: map[string]string{AnnoLastUsed: now.UTC().Format(time.RFC3339), AnnoIdle: sb.IdleTimeout.String(),
			"conch.sh/agent": agent, "conch.sh/scope": sb.Scope}}
	if pool != "" {
		delete(meta.Labels, LabelScope)
		meta.Labels[LabelPool] = pool
		meta.Annotations["conch.sh/scope"] = poolScope
		delete(meta.Annotations, "conch.sh/agent")
	}
	m.mu.Lock()
	m.pods[ns+"/"+name] = cl
	s.cl, s.ns, s.name, s.kind, s.uid, s.hash, s.nodeID, s.lastUse, s.patched, s.idle, s.ours = cl, ns, name, kind, "", hash, "", now, now, sb.IdleTimeout, false
	m.mu.Unlock()
	cctx, cancel := ctxTimeout(ctx)
	if useCRD {
		var shutdown time.Time
		if sb.IdleTimeout > 0 {
			shutdown = now.Add(sb.IdleTimeout)
		}
		obj, err2 := sandboxObject(ns, name, meta, spec, shutdown)
		if err = err2; err == nil {
			_, err = cl.dyn.Resource(sandboxGVR).Namespace(ns).Create(cctx, obj, metav1.CreateOptions{})
		}
	} else {
		var pod *corev1.Pod
		pod, err = cl.pods(ns).Create(cctx, &corev1.Pod{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{})
		if err == nil {
			m.mu.Lock()
			s.uid = string(pod.UID)
			m.mu.Unlock()
			err = m.hub.BindPodUID(hash, string(pod.UID))
		}
	}
	cancel()
	if err != nil {
		m.forget(s, hash)
		return port.Ref{}, cl.explain(err, fmt.Sprintf("create %s %s in namespace %s", strings.ToLower(kind), name, ns))
	}
	start := time.Now()
	ref, err := m.await(ctx, cl, s, sb, progress)
	if err != nil {
		m.remove(context.Background(), s, "failed to start: "+err.Error())
		return port.Ref{}, err
	}
	m.mu.Lock()
	s.nodeID = ref.ID
	m.mu.Unlock()
	m.watch(s)
	progress(fmt.Sprintf("Sandbox pod %s/%s is ready (%.1fs).", ns, name, time.Since(start).Seconds()))
	return ref, nil
}

// await waits until the scope's pod is paired and connected, fails as
// soon as the pod cannot run (image pull, eviction, deletion), or times
// out after the startup timeout with what the pod was doing.
func (m *Manager) await(ctx context.Context, cl *cluster, s *scope, sb config.SandboxSettings, progress func(string)) (port.Ref, error) {
	m.mu.Lock()
	ns, name, hash := s.ns, s.name, s.hash
	m.mu.Unlock()
	deadline := time.Now().Add(sb.Kube.StartupTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var pod *corev1.Pod
	var lastGet time.Time
	for {
		if ref, ok := m.ready(hash); ok {
			return ref, nil
		}
		if time.Since(lastGet) >= 500*time.Millisecond {
			lastGet = time.Now()
			cctx, cancel := ctxTimeout(ctx)
			p, err := cl.pods(ns).Get(cctx, name, metav1.GetOptions{})
			cancel()
			switch {
			case apierrors.IsNotFound(err):
				m.mu.Lock()
				kind, uid := s.kind, s.uid
				m.mu.Unlock()
				if kind == "Pod" || uid != "" {
					return port.Ref{}, &podGone{cl.withEvents(ctx, ns, name, fmt.Sprintf("sandbox pod %s/%s was deleted before it connected", ns, name))}
				}
			case err != nil:
				return port.Ref{}, cl.explain(err, fmt.Sprintf("read pod %s/%s", ns, name))
			default:
				pod = p
				m.mu.Lock()
				if s.uid == "" {
					s.uid = string(p.UID)
					m.mu.Unlock()
					m.hub.BindPodUID(hash, string(p.UID))
				} else {
					m.mu.Unlock()
				}
				if why := podFailure(p); why != "" {
					return port.Ref{}, &podGone{cl.withEvents(ctx, ns, name, fmt.Sprintf("sandbox pod %s/%s cannot run: %s", ns, name, why))}
				}
				if p.DeletionTimestamp != nil {
					return port.Ref{}, &podGone{cl.withEvents(ctx, ns, name, fmt.Sprintf("sandbox pod %s/%s was deleted before it connected", ns, name))}
				}
			}
		}
		if time.Now().After(deadline) {
			return port.Ref{}, errors.New(cl.withEvents(ctx, ns, name, fmt.Sprintf("sandbox pod %s/%s did not start and connect within %s (sandbox.kubernetes.startupTimeout): %s", ns, name, sb.Kube.StartupTimeout, podPending(pod))))
		}
		select {
		case <-ctx.Done():
			return port.Ref{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// podGone is await's error when the pod ended (deleted, failed).
type podGone struct{ msg string }

func (e *podGone) Error() string { return e.msg }

// settle waits (a few seconds at most) until the watch of the scope's pod
// has handled its end, so that the watch alone decides whether it was a
// loss; false when it did not.
func (m *Manager) settle(ctx context.Context, s *scope, hash string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.mu.Lock()
		done := s.hash != hash
		m.mu.Unlock()
		if done {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// touch records a use of the scope's sandbox; the last-used annotation
// (and a Sandbox's shutdownTime) is rewritten at most every tenth of the
// idle timeout.
func (m *Manager) touch(ctx context.Context, s *scope, idle time.Duration) {
	now := time.Now()
	m.mu.Lock()
	s.lastUse, s.idle = now, idle
	due := idle > 0 && now.Sub(s.patched) > idle/10
	if due {
		s.patched = now
	}
	cl, ns, name, kind := s.cl, s.ns, s.name, s.kind
	m.mu.Unlock()
	if !due || cl == nil {
		return
	}
	cctx, cancel := ctxTimeout(ctx)
	defer cancel()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, AnnoLastUsed, now.UTC().Format(time.RFC3339))
	cl.pods(ns).Patch(cctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if kind == "Sandbox" {
		sp := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"shutdownTime":%q}}`, AnnoLastUsed, now.UTC().Format(time.RFC3339), now.Add(idle).UTC().Format(time.RFC3339))
		cl.dyn.Resource(sandboxGVR).Namespace(ns).Patch(cctx, name, types.MergePatchType, []byte(sp), metav1.PatchOptions{})
	}
}

// forget clears the scope and drops its join token.
func (m *Manager) forget(s *scope, hash string) {
	m.mu.Lock()
	nodeID := ""
	if s.hash == hash {
		nodeID = s.nodeID
		m.clearLocked(s)
	}
	m.mu.Unlock()
	if p, found, _ := m.hub.PodNode(hash); found {
		nodeID = p.NodeID
	}
	m.hub.DropPod(nodeID, hash, "")
}

// clearLocked makes the scope forget its pod (m.mu held).
func (m *Manager) clearLocked(s *scope) {
	if s.watching != nil {
		s.watching()
	}
	delete(m.pods, s.ns+"/"+s.name)
	s.cl, s.name, s.uid, s.hash, s.nodeID, s.watching = nil, "", "", "", "", nil
}

// remove deletes the scope's sandbox (conch's own decision: idle,
// failed start, recreate); its sessions end lost with reason.
func (m *Manager) remove(ctx context.Context, s *scope, reason string) {
	m.mu.Lock()
	cl, ns, name, kind, hash := s.cl, s.ns, s.name, s.kind, s.hash
	s.ours = true
	m.mu.Unlock()
	if cl != nil && name != "" {
		deleteSandbox(ctx, cl, ns, name, kind, reason)
	}
	nodeID := ""
	if p, found, _ := m.hub.PodNode(hash); found {
		nodeID = p.NodeID
	}
	m.hub.DropPod(nodeID, hash, fmt.Sprintf("sandbox pod %s/%s was deleted by conch (%s).", ns, name, reason))
	m.forget(s, hash)
}

// deleteSandbox marks the object with the reason and deletes it (a
// Sandbox, whose controller deletes its pod, or the pod).
func deleteSandbox(ctx context.Context, cl *cluster, ns, name, kind, reason string) error {
	cctx, cancel := ctxTimeout(ctx)
	defer cancel()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, AnnoDeleteWhy, reason)
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	cl.pods(ns).Patch(cctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	var err error
	if kind == "Sandbox" {
		err = cl.dyn.Resource(sandboxGVR).Namespace(ns).Delete(cctx, name, opts)
	} else {
		err = cl.pods(ns).Delete(cctx, name, opts)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return cl.explain(err, fmt.Sprintf("delete %s %s/%s", strings.ToLower(kind), ns, name))
	}
	return nil
}

// watch follows the scope's pod: a pod deleted, evicted or failed ends
// its sessions as lost with the cluster's reason, and the next call
// reports it once.
func (m *Manager) watch(s *scope) {
	ctx, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	if s.watching != nil {
		s.watching()
	}
	s.watching = cancel
	cl, ns, name, hash := s.cl, s.ns, s.name, s.hash
	m.mu.Unlock()
	go func() {
		for ctx.Err() == nil {
			why, ours := m.follow(ctx, s, cl, ns, name)
			if ctx.Err() != nil {
				return
			}
			if why == "" {
				// The watch ended (API server timeout): watch again.
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				continue
			}
			m.lost(s, hash, why, ours)
			return
		}
	}()
}

// follow watches pod ns/name of scope s until it is gone, failed or its
// node lost (the reason; ours when conch deleted it: recreate, prune) or
// the watch ends ("").
//
// A node is lost when both the cluster and the link say so: the pod is
// not Ready (its node stopped reporting: the node controller marks its
// pods not ready) and the pod's node link has been down for the whole
// grace (sandbox.kubernetes.nodeLostGrace). Either alone is no loss: a
// link that drops while the pod is Ready is a network blip or a gateway
// restart, and the node reconnects and resumes its sessions; a pod that
// is not Ready while its link is up still runs them.
func (m *Manager) follow(ctx context.Context, s *scope, cl *cluster, ns, name string) (string, bool) {
	gctx, cancel := ctxTimeout(ctx)
	p, err := cl.pods(ns).Get(gctx, name, metav1.GetOptions{})
	cancel()
	if apierrors.IsNotFound(err) {
		return cl.withEvents(ctx, ns, name, fmt.Sprintf("sandbox pod %s/%s was deleted", ns, name)), false
	}
	if err != nil {
		return "", false
	}
	if why := gone(p); why != "" {
		return cl.withEvents(ctx, ns, name, why), p.Annotations[AnnoDeleteWhy] != ""
	}
	w, err := cl.pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: p.ResourceVersion})
	if err != nil {
		return "", false
	}
	defer w.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	notReady := podNotReady(p)
	var downSince time.Time
	for {
		select {
		case <-ctx.Done():
			return "", false
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", false
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			ours := pod.Annotations[AnnoDeleteWhy] != ""
			if ev.Type == watch.Deleted {
				why := fmt.Sprintf("sandbox pod %s/%s was deleted", ns, name)
				if r := pod.Annotations[AnnoDeleteWhy]; r != "" {
					why += " (" + r + ")"
				}
				return cl.withEvents(ctx, ns, name, why), ours
			}
			if why := gone(pod); why != "" {
				return cl.withEvents(ctx, ns, name, why), ours
			}
			notReady = podNotReady(pod)
		case <-tick.C:
		}
		m.mu.Lock()
		nodeID, grace := s.nodeID, s.grace
		m.mu.Unlock()
		if grace <= 0 {
			grace = config.DefaultKubeNodeLostGrace
		}
		if notReady == "" || nodeID == "" || m.hub.PodConnected(nodeID) {
			downSince = time.Time{}
			continue
		}
		if downSince.IsZero() {
			downSince = time.Now()
			continue
		}
		if time.Since(downSince) >= grace {
			return cl.withEvents(ctx, ns, name, fmt.Sprintf("sandbox pod %s/%s lost its node: %s, and its node link has been down for %s (sandbox.kubernetes.nodeLostGrace)", ns, name, notReady, grace)), false
		}
	}
}

// podNotReady says why a running pod is not ready (its node stopped
// reporting, or its container is not ready), or "".
func podNotReady(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodUnknown {
		return "pod phase Unknown on node " + p.Spec.NodeName
	}
	if p.Status.Phase != corev1.PodRunning {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodReady || c.Status == corev1.ConditionTrue {
			continue
		}
		why := fmt.Sprintf("pod Ready=%s on node %s", c.Status, p.Spec.NodeName)
		if c.Reason != "" {
			why += ", " + c.Reason
		}
		if c.Message != "" {
			why += ": " + c.Message
		}
		return why
	}
	return ""
}

// gone says why a running sandbox pod is lost, or "".
func gone(p *corev1.Pod) string {
	name := p.Namespace + "/" + p.Name
	if p.DeletionTimestamp != nil {
		why := "sandbox pod " + name + " was deleted"
		if r := p.Annotations[AnnoDeleteWhy]; r != "" {
			why += " (" + r + ")"
		}
		return why
	}
	if f := podFailure(p); f != "" {
		return "sandbox pod " + name + " stopped: " + f
	}
	return ""
}

// lost handles the loss of the scope's pod.
func (m *Manager) lost(s *scope, hash, why string, ours bool) {
	m.mu.Lock()
	if s.hash != hash {
		m.mu.Unlock()
		return
	}
	ours = ours || s.ours
	if !ours {
		s.lost = why
	}
	cl, ns, name, kind, nodeID := s.cl, s.ns, s.name, s.kind, s.nodeID
	// Forgotten at once, with the loss recorded: the next call reports
	// it and never finds the lost pod.
	m.clearLocked(s)
	m.mu.Unlock()
	m.log.Warn("sandbox pod lost", "pod", ns+"/"+name, "reason", why)
	if p, found, _ := m.hub.PodNode(hash); found {
		nodeID = p.NodeID
	}
	m.hub.DropPod(nodeID, hash, why+".")
	if cl != nil && !ours {
		// A failed pod (or the Sandbox asking for it) is deleted: it
		// holds resources and nothing will run in it again.
		deleteSandbox(context.Background(), cl, ns, name, kind, "lost: "+why)
	}
}

// reaper deletes sandboxes idle longer than their idle timeout.
func (m *Manager) reaper() {
	defer close(m.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.mu.Lock()
		var idle, busy []*scope
		for _, s := range m.scopes {
			if s.nodeID == "" && s.hash != "" {
				if p, found, _ := m.hub.PodNode(s.hash); found {
					s.nodeID = p.NodeID
				}
			}
			if s.nodeID == "" || s.idle <= 0 {
				continue
			}
			if m.hub.Running(s.nodeID) > 0 {
				busy = append(busy, s)
				continue
			}
			if time.Since(s.lastUse) > s.idle {
				idle = append(idle, s)
			}
		}
		m.mu.Unlock()
		for _, s := range busy {
			m.mu.Lock()
			d := s.idle
			m.mu.Unlock()
			m.touch(context.Background(), s, d) // a running session is use
		}
		for _, s := range idle {
			if !s.mu.TryLock() {
				continue // an Ensure is using it
			}
			m.mu.Lock()
			still := s.nodeID != "" && time.Since(s.lastUse) > s.idle
			d := s.idle
			m.mu.Unlock()
			if still {
				m.remove(context.Background(), s, fmt.Sprintf("idle for %s, sandbox.idleTimeout", d))
			}
			s.mu.Unlock()
		}
	}
}

// verify is the hub's PodVerifier: the token must be a service-account
// token of b's service account, issued for conch and bound to pod b (the
// API server puts the pod's name and UID in a bound token).
func (m *Manager) verify(ctx context.Context, token string, b nodehub.PodBinding) (string, error) {
	m.mu.Lock()
	cl := m.pods[b.Namespace+"/"+b.Name]
	m.mu.Unlock()
	if cl == nil {
		return "", fmt.Errorf("pod %s/%s is not a sandbox this gateway is starting", b.Namespace, b.Name)
	}
	tr := &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token, Audiences: []string{apitype.PodTokenAudience}}}
	res, err := cl.tokenReviews().Create(ctx, tr, metav1.CreateOptions{})
	if err != nil {
		return "", cl.explain(err, "review the pod's service-account token")
	}
	st := res.Status
	if !st.Authenticated {
		return "", fmt.Errorf("the cluster did not accept the pod's service-account token: %s", st.Error)
	}
	if want := "system:serviceaccount:" + b.Namespace + ":" + b.ServiceAccount; st.User.Username != want {
		return "", fmt.Errorf("the token is %s's, not %s's", st.User.Username, want)
	}
	names, uids := st.User.Extra["authentication.kubernetes.io/pod-name"], st.User.Extra["authentication.kubernetes.io/pod-uid"]
	if len(names) != 1 || len(uids) != 1 {
		return "", errors.New("the token is not bound to a pod (use a projected service-account token)")
	}
	if names[0] != b.Name {
		return "", fmt.Errorf("the token is bound to pod %s, not %s", names[0], b.Name)
	}
	if b.UID == "" {
		cctx, cancel := ctxTimeout(ctx)
		defer cancel()
		p, err := cl.pods(b.Namespace).Get(cctx, b.Name, metav1.GetOptions{})
		if err != nil {
			return "", cl.explain(err, "read pod "+b.Namespace+"/"+b.Name)
		}
		if string(p.UID) != uids[0] {
			return "", fmt.Errorf("the token is bound to another pod named %s", b.Name)
		}
	}
	return uids[0], nil
}

// Resume runs once at gateway start, before the gateway serves: it finds
// the sandbox pods this gateway had paired and checks each with the API
// server. The sessions of a pod that is gone (deleted, evicted, failed
// while the gateway was down) end lost at once with the cluster's
// reason; a pod still there is adopted — its watch resumes and its idle
// clock continues from its last-used annotation. A pod whose cluster
// does not answer within ctx is adopted unchecked; its watch keeps
// trying and reports the loss as soon as the cluster answers.
func (m *Manager) Resume(ctx context.Context) {
	for _, p := range m.hub.PodNodes() {
		b := *p.Pod
		cl, err := clusterFor(config.KubeSettings{Kubeconfig: b.Kubeconfig, Context: b.Context})
		if err != nil {
			m.log.Warn("sandbox pod not resumed", "pod", b.Namespace+"/"+b.Name, "err", err)
			continue
		}
		if b.Pool != "" {
			m.adoptMember(ctx, cl, p)
			continue
		}
		s := m.scopeOf(b.Namespace + "/" + b.Scope)
		s.mu.Lock()
		m.mu.Lock()
		if s.hash != "" {
			m.mu.Unlock()
			s.mu.Unlock()
			continue
		}
		kind := b.Kind
		if kind == "" {
			kind = "Pod"
		}
		s.cl, s.ns, s.name, s.kind, s.uid, s.hash, s.nodeID = cl, b.Namespace, b.Name, kind, b.UID, p.InviteHash, p.NodeID
		s.lastUse, s.patched, s.idle, s.ours, s.lost = time.Now(), time.Now(), 0, false, ""
		if s.grace <= 0 {
			s.grace = config.DefaultKubeNodeLostGrace
		}
		m.mu.Unlock()
		why, ours, pod := m.check(ctx, cl, b)
		switch {
		case why != "":
			m.lost(s, p.InviteHash, why, ours)
		default:
			if pod != nil {
				m.mu.Lock()
				if d, err := time.ParseDuration(pod.Annotations[AnnoIdle]); err == nil {
					s.idle = d
				}
				if tm, err := time.Parse(time.RFC3339, pod.Annotations[AnnoLastUsed]); err == nil {
					s.lastUse, s.patched = tm, tm
				}
				m.mu.Unlock()
			}
			m.watch(s)
		}
		s.mu.Unlock()
	}
}

// check reads the pod of b: why it is lost ("" when it is there and
// runs, or when the cluster did not answer), whether conch deleted it,
// and the pod when it was read.
func (m *Manager) check(ctx context.Context, cl *cluster, b nodehub.PodBinding) (string, bool, *corev1.Pod) {
	ns, name := b.Namespace, b.Name
	cctx, cancel := ctxTimeout(ctx)
	pod, err := cl.pods(ns).Get(cctx, name, metav1.GetOptions{})
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		return cl.withEvents(ctx, ns, name, fmt.Sprintf("sandbox pod %s/%s was deleted", ns, name)), false, nil
	case err != nil:
		m.log.Warn("sandbox pod not checked at start", "pod", ns+"/"+name, "err", cl.explain(err, "read pod "+ns+"/"+name))
		return "", false, nil
	case b.UID != "" && string(pod.UID) != b.UID:
		return cl.withEvents(ctx, ns, name, fmt.Sprintf("sandbox pod %s/%s was deleted (a pod of that name with another UID is there now)", ns, name)), false, nil
	}
	if why := gone(pod); why != "" {
		return cl.withEvents(ctx, ns, name, why), pod.Annotations[AnnoDeleteWhy] != "", pod
	}
	return "", false, pod
}

// Patch applies an apply_patch input in the /workspace of agent's sandbox
// pod (host.PodSandboxes), through the pod's node; the pod is created
// first if need be, as for a command.
func (m *Manager) Patch(ctx context.Context, agent string, sb config.SandboxSettings, input string) (port.Patch, *apitype.Error) {
	if m := sb.KubeMissing(); m != "" {
		return port.Patch{}, host.SandboxUnavailable(errors.New("sandbox.backend is kubernetes, but " + m + " is not set"))
	}
	ref, err := m.Ensure(ctx, agent, sb, func(line string) { m.log.Info(line, "agent", agent) })
	if err != nil {
		return port.Patch{}, host.SandboxUnavailable(err)
	}
	return m.hub.PatchPod(ctx, ref, agent, input)
}
