package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// Sandbox pods (the kubernetes backend, docs/kubernetes.md). The gateway
// creates a pod, mints a single-use join token bound to it, and the
// `conch node` in the pod dials in with that token and the pod's
// projected service-account token. The hub pairs it without an operator
// once the verifier (TokenReview) confirms that the service-account token
// belongs to exactly that pod.

// PodBinding is the pod a join token was minted for.
type PodBinding struct {
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	UID            string `json:"uid,omitempty"` // "" until the pod exists
	ServiceAccount string `json:"serviceAccount"`
	Scope          string `json:"scope"`
	// Where the gateway finds the pod again after a restart: its kind
	// (Pod | Sandbox) and the cluster (kubeconfig path and context; both
	// "" in the cluster the gateway runs in).
	Kind       string `json:"kind,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	// Pool is the warm pool of a pod started ahead of need (Scope ""
	// until an agent's first call claims it).
	Pool string `json:"pool,omitempty"`
}

// PodVerifier checks a pod's service-account token against b and returns
// the pod's UID; an error says why the token does not prove that pod.
type PodVerifier func(ctx context.Context, token string, b PodBinding) (uid string, err error)

// SetPodVerifier installs the verifier of pod-bound join tokens (the
// kubernetes backend); without one such tokens are refused.
func (h *Hub) SetPodVerifier(v PodVerifier) {
	h.mu.Lock()
	h.podVerify = v
	h.mu.Unlock()
}

// CreatePodInvite mints a single-use join token for pod b, valid for ttl;
// it returns the token and its hash (which names the pairing).
func (h *Hub) CreatePodInvite(b PodBinding, ttl time.Duration) (tok, hash string, err error) {
	tok = NewToken("cnj_")
	hash = TokenHash(tok)
	now := time.Now()
	err = h.store.Update(func(st *State) error {
		st.Invites = append(st.Invites, Invite{Hash: hash, CreatedAtMs: now.UnixMilli(), ExpiresAtMs: now.Add(ttl).UnixMilli(), Once: true, Pod: &b})
		return nil
	})
	return tok, hash, err
}

// BindPodUID records the UID of the pod an invite was minted for, once the
// pod exists: only that pod (not a later one of the same name) may redeem
// it.
func (h *Hub) BindPodUID(hash, uid string) error {
	return h.store.Update(func(st *State) error {
		for i := range st.Invites {
			if in := &st.Invites[i]; in.Hash == hash && in.Pod != nil {
				in.Pod.UID = uid
				return nil
			}
		}
		return errors.New("the sandbox pod's join token is gone")
	})
}

// PodNode returns the node paired with the invite hash, and whether it is
// connected now.
func (h *Hub) PodNode(hash string) (p Paired, found, connected bool) {
	st, err := h.store.Read()
	if err != nil {
		return p, false, false
	}
	for _, x := range st.Paired {
		if x.Pod != nil && x.InviteHash == hash {
			return x, true, h.conn(x.NodeID) != nil
		}
	}
	return p, false, false
}

// PodNodes returns the paired sandbox pods.
func (h *Hub) PodNodes() []Paired {
	st, err := h.store.Read()
	if err != nil {
		return nil
	}
	var out []Paired
	for _, x := range st.Paired {
		if x.Pod != nil {
			out = append(out, x)
		}
	}
	return out
}

// ClaimPod gives the warm-pool pod paired with invite hash to scope.
func (h *Hub) ClaimPod(hash, scope string) error {
	return h.store.Update(func(st *State) error {
		for i := range st.Paired {
			if p := &st.Paired[i]; p.Pod != nil && p.InviteHash == hash {
				p.Pod.Scope, p.Pod.Pool = scope, ""
				return nil
			}
		}
		return errors.New("the warm sandbox pod is no longer paired")
	})
}

// PodConnected reports whether node id has a link to the gateway now.
func (h *Hub) PodConnected(nodeID string) bool {
	return h.conn(nodeID) != nil
}

// Running counts the mirrored sessions of node id that have not ended.
func (h *Hub) Running(nodeID string) int {
	n := 0
	for _, m := range h.mirrorsOf(nodeID) {
		m.mu.Lock()
		if m.final == nil {
			n++
		}
		m.mu.Unlock()
	}
	return n
}

// DropPod forgets the sandbox pod paired as node id (its pod is gone or
// being deleted) and its unused invites: its connection is closed and its
// running sessions end as lost with reason.
func (h *Hub) DropPod(nodeID, inviteHash, reason string) {
	h.updateStore(func(st *State) error {
		st.Paired = filter(st.Paired, func(p Paired) bool { return p.NodeID != nodeID || nodeID == "" })
		st.Invites = filter(st.Invites, func(in Invite) bool { return in.Hash != inviteHash })
		for sid, r := range st.Routes {
			if nodeID != "" && r.NodeID == nodeID {
				delete(st.Routes, sid)
			}
		}
		return nil
	})
	if nodeID == "" {
		return
	}
	h.mu.Lock()
	c := h.conns[nodeID]
	var ms []*mirror
	for _, m := range h.mirrors {
		if m.nodeID == nodeID {
			ms = append(ms, m)
		}
	}
	h.mu.Unlock()
	for _, m := range ms {
		m.end(proto.Exit{State: proto.StateLost, EndedAt: time.Now().UnixMilli(), Reason: "Command lost: " + reason})
	}
	if c != nil {
		h.disconnect(c, CloseRevoked, "sandbox pod removed")
	}
	h.emit("node.removed", map[string]any{"nodeId": nodeID})
}

// podInvite reports whether the join token of hash is bound to a pod.
func (h *Hub) podInvite(hash string) bool {
	st, err := h.store.Read()
	if err != nil {
		return false
	}
	for _, in := range st.Invites {
		if in.Hash == hash {
			return in.Pod != nil
		}
	}
	return false
}

// pairPod serves the hello of a node that presented a pod-bound join
// token: it pairs at once when the pod's service-account token proves
// the pod, else it is refused.
func (h *Hub) pairPod(c *conn, helloID, hash, podToken string) {
	fail := func(msg string) {
		b, _ := json.Marshal(map[string]any{})
		c.send(apitype.Frame{Type: "res", ID: helloID, Payload: b, Error: apitype.Errorf("UNAUTHORIZED", "%s", msg)})
		c.link.Close(CloseAuth, truncate(msg, 120))
	}
	h.mu.Lock()
	verify := h.podVerify
	h.mu.Unlock()
	if verify == nil {
		fail("this join token is bound to a sandbox pod, and this gateway has no kubernetes backend to verify it")
		return
	}
	if podToken == "" {
		fail("this join token is bound to a sandbox pod: the node must present its pod's service-account token (--pod-token-file)")
		return
	}
	st, err := h.store.Read()
	if err != nil {
		fail("pairing state unreadable")
		return
	}
	var b *PodBinding
	for _, in := range st.Invites {
		if in.Hash == hash && in.Pod != nil {
			b = in.Pod
		}
	}
	if b == nil {
		fail("join token unknown")
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	uid, err := verify(ctx, podToken, *b)
	cancel()
	if err != nil {
		h.log.Warn("sandbox pod identity refused", "pod", b.Namespace+"/"+b.Name, "node", c.hello.NodeID, "err", err)
		fail("pod identity check failed: " + err.Error())
		return
	}
	hello := c.hello
	token := NewToken("cnt_")
	err = h.store.Update(func(st *State) error {
		var in *Invite
		for i := range st.Invites {
			if st.Invites[i].Hash == hash {
				in = &st.Invites[i]
			}
		}
		switch {
		case in == nil || in.Pod == nil:
			return errors.New("join token unknown")
		case in.Used:
			return errors.New("join token already used")
		case in.Pod.UID != "" && in.Pod.UID != uid:
			return fmt.Errorf("the token belongs to pod %s/%s with another UID (a newer pod of the same name?)", in.Pod.Namespace, in.Pod.Name)
		}
		for _, p := range st.Paired {
			if p.NodeID == hello.NodeID {
				return errors.New("node is already paired; it must connect with its node token")
			}
		}
		in.Used = true
		pod := *in.Pod
		pod.UID = uid
		st.Paired = append(st.Paired, Paired{NodeID: hello.NodeID, PublicKey: hello.PublicKey, Name: st.assignName(pod.Name, hello.NodeID, true),
			TokenHash: TokenHash(token), Platform: hello.Platform, Arch: hello.Arch, Version: hello.Version, Caps: hello.Caps,
			RemoteIP: c.remoteIP, PairedAt: time.Now().UnixMilli(), InviteHash: hash, Pod: &pod})
		return nil
	})
	if err != nil {
		fail(err.Error())
		return
	}
	b2, _ := json.Marshal(apitype.NodeHelloReply{Status: "paired", NodeID: hello.NodeID})
	if c.send(apitype.Frame{Type: "res", ID: helloID, OK: true, Payload: b2}) != nil {
		return
	}
	if c.event("node.paired", map[string]string{"nodeToken": token, "nodeId": hello.NodeID}) != nil {
		return
	}
	h.log.Info("sandbox pod paired", "pod", b.Namespace+"/"+b.Name, "node", hello.NodeID)
	h.online(c)
}
