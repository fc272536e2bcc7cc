package hub

import (
	"errors"
	"time"
)

// The operator operations of /v1/nodes, as the HTTP
// adapter and the CLI without a gateway both call them. The callers check
// operator rights.

// ErrInvalidTTL refuses an invite whose validity is not positive.
var ErrInvalidTTL = errors.New("invalid ttl: use a duration such as 24h")

// Overview is the answer of GET /v1/nodes: every node (paired, then
// pending requests), the same split in two, and how many are connected.
// The fields are in the order of their JSON names.
type Overview struct {
	Connected int    `json:"connected"`
	Nodes     []Node `json:"nodes"`
	Paired    []Node `json:"paired"`
	Pending   []Node `json:"pending"`
}

// Overview lists the paired nodes and the pending requests.
func (h *Hub) Overview() (Overview, error) {
	list, err := h.List()
	if err != nil {
		return Overview{}, err
	}
	o := Overview{Nodes: list, Paired: []Node{}, Pending: []Node{}}
	for _, n := range list {
		if n.Status == "pending" {
			o.Pending = append(o.Pending, n)
		} else {
			o.Paired = append(o.Paired, n)
		}
	}
	o.Connected = h.Connected()
	return o, nil
}

// NewInvite is a join token just made (the only time it is shown).
type NewInvite struct {
	ExpiresAtMs int64  `json:"expiresAtMs"`
	Once        bool   `json:"once"`
	Token       string `json:"token"`
}

// Invite makes a join token valid for ttl (usable by one node only if
// once). A ttl that is not positive is refused (ErrInvalidTTL).
func (h *Hub) Invite(ttl time.Duration, once bool) (NewInvite, error) {
	if ttl <= 0 {
		return NewInvite{}, ErrInvalidTTL
	}
	tok, exp, err := h.store.CreateInvite(ttl, once)
	if err != nil {
		return NewInvite{}, err
	}
	return NewInvite{ExpiresAtMs: exp, Once: once, Token: tok}, nil
}
