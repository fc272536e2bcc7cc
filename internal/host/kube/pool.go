package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conchsh/conch/internal/config"
	nodehub "github.com/conchsh/conch/internal/node/hub"
	"github.com/conchsh/conch/internal/node/port"
)

// The warm pool (sandbox.kubernetes.warmPool): plain pods started and
// paired ahead of need, one pool per pod template. An agent's first
// sandboxed call claims a ready one instead of waiting for a new pod;
// the pool then starts another.
//
// The agent-sandbox SandboxWarmPool is not used: its controller makes its
// pods from one shared template, and conch's join token is minted for,
// and bound to, a single pod it creates itself.

const (
	LabelPool = "conch.sh/pool" // the pool's key, on a pod not claimed yet
	poolScope = "warm-pool"     // the conch.sh/scope annotation of such a pod
	AnnoWarm  = "conch.sh/warm" // "ready" once a pool pod is paired and waits
	// poolRetry is how long a pool waits after a pod that failed to start.
	poolRetry = 10 * time.Second
)

// pool is one warm pool.
type pool struct {
	sb       config.SandboxSettings // the template (Scope "")
	cl       *cluster
	ns       string
	want     int
	members  []*scope // started and paired, not claimed
	starting int
	failedAt time.Time
}

// poolKey names the pool of sandboxes made with sb: the same key, the
// same pod (template, environment, cluster, namespace).
func poolKey(ns string, sb config.SandboxSettings) string {
	k := sb.Kube
	k.WarmPool, k.StartupTimeout, k.NodeLostGrace = 0, 0, 0
	b, _ := json.Marshal(struct {
		NS   string
		Kube config.KubeSettings
		Env  map[string]string
		Idle time.Duration
	}{ns, k, sb.Env, sb.IdleTimeout})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// WarmPools starts keeping the warm pools that cfg's agents ask for (a
// gateway calls it once, after Resume; cfg is read again every second,
// so a reloaded configuration resizes, adds and empties pools).
func (m *Manager) WarmPools(cfg func() *config.Config) {
	m.mu.Lock()
	m.cfg = cfg
	m.mu.Unlock()
	m.kick()
}

// syncPools sizes the warm pools from the sandbox settings of every
// agent. A pool no agent uses any more is emptied.
func (m *Manager) syncPools(cfg *config.Config) {
	want := map[string]*pool{}
	for _, a := range agents(cfg) {
		sb := cfg.SandboxFor(a)
		if !sb.On || sb.Backend != "kubernetes" || sb.Kube.WarmPool <= 0 || sb.KubeMissing() != "" || sb.Kube.SandboxCRD == "always" {
			continue
		}
		cl, err := clusterFor(sb.Kube)
		if err != nil {
			continue
		}
		ns := cl.namespace(sb.Kube)
		if sb.Kube.SandboxCRD == "auto" {
			if ok, err := cl.hasSandboxCRD(); ok || err != nil {
				continue // these agents' sandboxes are Sandbox objects
			}
		}
		key := poolKey(ns, sb)
		p := want[key]
		if p == nil {
			t := sb
			t.Scope = ""
			p = &pool{sb: t, cl: cl, ns: ns}
			want[key] = p
		}
		p.want = max(p.want, sb.Kube.WarmPool)
	}
	m.mu.Lock()
	for key, p := range m.pools {
		if w := want[key]; w != nil {
			p.sb, p.cl, p.ns, p.want = w.sb, w.cl, w.ns, w.want
		} else {
			p.want = 0
		}
	}
	for key, w := range want {
		if m.pools[key] == nil {
			m.pools[key] = w
		}
	}
	m.mu.Unlock()
}

func (m *Manager) kick() {
	select {
	case m.fill <- struct{}{}:
	default:
	}
}

// pooler keeps every warm pool at its size.
func (m *Manager) pooler() {
	defer close(m.pdone)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		case <-m.fill:
		}
		m.mu.Lock()
		cfg := m.cfg
		m.mu.Unlock()
		if cfg == nil {
			continue
		}
		if c := cfg(); c != nil {
			m.syncPools(c)
		}
		var surplus []*scope
		m.mu.Lock()
		for key, p := range m.pools {
			live := p.members[:0]
			for _, s := range p.members {
				if s.hash != "" { // a lost member is cleared by its watch
					live = append(live, s)
				}
			}
			p.members = live
			for len(p.members) > p.want {
				surplus = append(surplus, p.members[len(p.members)-1])
				p.members = p.members[:len(p.members)-1]
			}
			if p.want == 0 && p.starting == 0 && len(p.members) == 0 {
				delete(m.pools, key)
				continue
			}
			if time.Since(p.failedAt) < poolRetry {
				continue
			}
			for n := p.want - len(p.members) - p.starting; n > 0; n-- {
				p.starting++
				go m.grow(key, p)
			}
		}
		var members []*scope
		for _, p := range m.pools {
			members = append(members, p.members...)
		}
		m.mu.Unlock()
		for _, s := range surplus {
			m.remove(context.Background(), s, "warm pool shrunk")
		}
		// A waiting pool pod is in use: its last-used annotation is kept
		// fresh, so prune leaves it while this gateway runs.
		for _, s := range members {
			m.mu.Lock()
			d := s.idle
			m.mu.Unlock()
			m.touch(context.Background(), s, d)
		}
	}
}

// grow starts one pod of pool p and adds it once paired.
func (m *Manager) grow(key string, p *pool) {
	m.mu.Lock()
	cl, ns, sb := p.cl, p.ns, p.sb
	m.mu.Unlock()
	s := &scope{}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := m.create(ctx, cl, s, ns, "", sb, func(string) {}, key)
	cancel()
	m.mu.Lock()
	p.starting--
	if err != nil {
		p.failedAt = time.Now()
	} else {
		p.members = append(p.members, s)
	}
	name := s.name
	m.mu.Unlock()
	if err == nil {
		// Marked once it can be claimed.
		cctx, cancel := ctxTimeout(context.Background())
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"ready"}}}`, AnnoWarm)
		cl.pods(ns).Patch(cctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		cancel()
	}
	if err != nil {
		m.log.Warn("warm sandbox pod failed to start", "namespace", ns, "err", err)
	}
}

// adoptMember takes back, at gateway start, a warm-pool pod paired before
// (b.Pool set) that is still there; one that is gone is forgotten.
func (m *Manager) adoptMember(ctx context.Context, cl *cluster, p nodehub.Paired) {
	b := *p.Pod
	s := &scope{}
	m.mu.Lock()
	s.cl, s.ns, s.name, s.kind, s.uid, s.hash, s.nodeID = cl, b.Namespace, b.Name, "Pod", b.UID, p.InviteHash, p.NodeID
	s.lastUse, s.grace = time.Now(), config.DefaultKubeNodeLostGrace
	m.mu.Unlock()
	if why, ours, _ := m.check(ctx, cl, b); why != "" {
		m.lost(s, p.InviteHash, why, ours)
		return
	}
	m.mu.Lock()
	pl := m.pools[b.Pool]
	if pl == nil {
		pl = &pool{cl: cl, ns: b.Namespace}
		m.pools[b.Pool] = pl
	}
	pl.members = append(pl.members, s)
	m.mu.Unlock()
	m.watch(s)
}

// claim gives scope s a ready pod of its warm pool, if there is one.
func (m *Manager) claim(ctx context.Context, cl *cluster, s *scope, ns, agent string, sb config.SandboxSettings, progress func(string)) (port.Ref, bool) {
	if sb.Kube.WarmPool <= 0 {
		return port.Ref{}, false
	}
	key := poolKey(ns, sb)
	// A pool pod whose link is down just now (the gateway restarted, a
	// blip) is waited for a little: it is still much sooner than a new
	// pod.
	wait := time.Now().Add(min(sb.Kube.StartupTimeout, 10*time.Second))
	for {
		m.mu.Lock()
		p := m.pools[key]
		var mem *scope
		waiting := false
		if p != nil {
			for i, x := range p.members {
				if x.hash == "" {
					continue
				}
				if !m.hub.PodConnected(x.nodeID) {
					waiting = true
					continue
				}
				mem = x
				p.members = append(p.members[:i:i], p.members[i+1:]...)
				break
			}
		}
		if mem == nil {
			m.mu.Unlock()
			if !waiting || time.Now().After(wait) || ctx.Err() != nil {
				return port.Ref{}, false
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if mem.watching != nil {
			mem.watching()
		}
		name, hash, nodeID, uid := mem.name, mem.hash, mem.nodeID, mem.uid
		mem.hash = "" // its watch, ending, no longer acts on it
		m.mu.Unlock()
		m.kick()
		now := time.Now()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"labels": map[string]any{LabelPool: nil, LabelScope: labelValue(sb.Scope)},
			"annotations": map[string]any{AnnoWarm: nil, "conch.sh/agent": agent, "conch.sh/scope": sb.Scope,
				AnnoLastUsed: now.UTC().Format(time.RFC3339), AnnoIdle: sb.IdleTimeout.String()}}})
		cctx, cancel := ctxTimeout(ctx)
		_, err := cl.pods(ns).Patch(cctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		cancel()
		if err == nil {
			err = m.hub.ClaimPod(hash, sb.Scope)
		}
		if err != nil {
			m.log.Warn("warm sandbox pod not claimed", "pod", ns+"/"+name, "err", err)
			m.mu.Lock()
			mem.hash = hash
			m.mu.Unlock()
			m.remove(context.Background(), mem, "claim failed")
			continue
		}
		ref, ok := m.ready(hash)
		m.mu.Lock()
		s.cl, s.ns, s.name, s.kind, s.uid, s.hash, s.nodeID = cl, ns, name, "Pod", uid, hash, nodeID
		s.lastUse, s.patched, s.idle, s.ours, s.lost = now, now, sb.IdleTimeout, false, ""
		m.mu.Unlock()
		m.watch(s)
		if !ok {
			// It lost its link just now: wait for it like any paired pod.
			var err error
			if ref, err = m.await(ctx, cl, s, sb, nil); err != nil {
				m.remove(context.Background(), s, "claimed from the warm pool, but did not answer")
				return port.Ref{}, false
			}
		}
		progress(fmt.Sprintf("Claimed sandbox pod %s/%s from the warm pool.", ns, name))
		return ref, true
	}
}
