package hub

import (
	"fmt"
	"sort"
	"strings"

	"github.com/conchsh/conch/apitype"
)

// Node lookup and naming. One reference names a node by one kind (see
// apitype.ParseNodeRef): an exact id matches ids only, a name names only,
// an IP remote IPs only, a prefix (operator commands only) id prefixes
// only. Names are kept unable to look like any other kind (assignName),
// so kinds never overlap and there is no tie between kinds to break. Within
// a kind, several matches are reported as ambiguous, never guessed: a
// connected node does not win over an offline one.

// cand is a paired node or a pairing request a reference matched.
type cand struct {
	id, name string
	pending  bool
}

// lookup returns the paired nodes (and, with pending, the pairing
// requests) r names, in a stable order.
func (st *State) lookup(r apitype.NodeRefOf, paired, pending bool) []cand {
	hit := func(id, name, ip string) bool {
		switch r.Kind {
		case apitype.NodeRefID:
			return id == r.Value
		case apitype.NodeRefName:
			return name != "" && name == r.Value
		case apitype.NodeRefIP:
			return ip != "" && apitype.CanonicalIP(ip) == r.Value
		case apitype.NodeRefPrefix:
			return strings.HasPrefix(id, r.Value)
		}
		return false
	}
	var out []cand
	if paired {
		for _, p := range st.Paired {
			if hit(p.NodeID, apitype.NormalizeNodeName(p.Name), p.RemoteIP) {
				out = append(out, cand{id: p.NodeID, name: p.Name})
			}
		}
	}
	if pending {
		for _, p := range st.Pending {
			n := apitype.NormalizeNodeName(p.Name)
			if hit(p.NodeID, n, p.RemoteIP) {
				out = append(out, cand{id: p.NodeID, name: n, pending: true})
			}
		}
	}
	return out
}

// parseOperatorRef reads a reference an operator typed: prefixes are
// allowed from apitype.MinNodePrefix characters.
func parseOperatorRef(q string) (apitype.NodeRefOf, error) {
	r, err := apitype.ParseNodeRef(q)
	if err != nil {
		return r, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	if r.Kind == apitype.NodeRefPrefix && len(r.Value) < apitype.MinNodePrefix {
		return r, fmt.Errorf("%w: %s: an id prefix needs at least %d characters (or give the full id, the name or the IP)", ErrNotFound, q, apitype.MinNodePrefix)
	}
	return r, nil
}

// resolve finds the one paired node or pairing request an operator's q
// names: a pairing request's id, else the reference's one kind.
func (st *State) resolve(q string, paired, pending bool) (cand, error) {
	if pending {
		for _, p := range st.Pending {
			if q != "" && q == p.RequestID {
				return cand{id: p.NodeID, name: apitype.NormalizeNodeName(p.Name), pending: true}, nil
			}
		}
	}
	r, err := parseOperatorRef(q)
	if err != nil {
		return cand{}, err
	}
	cs := st.lookup(r, paired, pending)
	switch len(cs) {
	case 0:
		return cand{}, ErrNotFound
	case 1:
		return cs[0], nil
	}
	return cand{}, fmt.Errorf("%w: %s matches %s", ErrAmbiguous, q, labels(cs))
}

func labels(cs []cand) string {
	var out []string
	for _, c := range cs {
		l := c.name + " (" + c.id + ")"
		if c.pending {
			l += " pending"
		}
		out = append(out, l)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// nameTaken reports whether another node than id holds name n, among
// paired nodes and (with pending) pairing requests.
func (st *State) nameTaken(n, id string, pending bool) bool {
	for _, p := range st.Paired {
		if p.NodeID != id && apitype.NormalizeNodeName(p.Name) == n {
			return true
		}
	}
	if pending {
		for _, p := range st.Pending {
			if p.NodeID != id && apitype.NormalizeNodeName(p.Name) == n {
				return true
			}
		}
	}
	return false
}

// assignName turns a node's proposed name into one it may hold: valid
// (apitype.ValidNodeName: never all hex, so never an id or id prefix)
// and held by no paired node (nor, for a pairing request, by another
// request). A name it may not hold is rewritten, never refused: the
// proposal is the node's, the rules are the gateway's.
func (st *State) assignName(proposed, id string, pending bool) string {
	n := apitype.NormalizeNodeName(proposed)
	if !apitype.IsRequestIDForm(n) { // refused whole below
		n = dropForeignIDParts(n, id)
	}
	if len(n) > apitype.MaxNodeName-(len(id)+1) {
		n = strings.TrimRight(n[:apitype.MaxNodeName-(len(id)+1)], "-")
	}
	if apitype.ValidNodeName(n) != nil {
		n = "node-" + short(id, 6)
	}
	for _, suffix := range []string{"", "-" + short(id, 6), "-" + short(id, 12), "-" + id} {
		if c := n + suffix; !st.nameTaken(c, id, pending) {
			return c
		}
	}
	return "node-" + id
}

// foreignIDPart returns the first part of name n (between dashes) that
// reads as the start of a node id (6 or more hex digits) but is not the
// start of id, the holder's own: "node-3f2a9c" or "web-3f2a9c" held by
// another node than 3f2a9c… would pass for that node's (the forms the
// gateway gives: node-<id>, <name>-<id>). "" when there is none.
func foreignIDPart(n, id string) string {
	for _, part := range strings.Split(n, "-") {
		if len(part) >= 6 && apitype.IsHex(part) && !strings.HasPrefix(id, part) {
			return part
		}
	}
	return ""
}

// dropForeignIDParts removes from a proposed name the parts that would
// pass for another node's id (foreignIDPart); "node" alone left of
// node-<another id> is dropped too (the fallback name follows).
func dropForeignIDParts(n, id string) string {
	if foreignIDPart(n, id) == "" {
		return n
	}
	var keep []string
	for _, part := range strings.Split(n, "-") {
		if foreignIDPart(part, id) == "" {
			keep = append(keep, part)
		}
	}
	n = strings.Join(keep, "-")
	if n == "node" {
		return ""
	}
	return n
}

func short(id string, n int) string {
	if len(id) < n {
		return id
	}
	return id[:n]
}

// fixNames rewrites the names that break the naming rules (left by an
// earlier conch, or edited by hand): a name that could be read as an id,
// and the second holder of a duplicated name. It reports the changes.
func (st *State) fixNames() []string {
	var changed []string
	for i := range st.Paired {
		p := &st.Paired[i]
		n := apitype.NormalizeNodeName(p.Name)
		dup := false
		for _, q := range st.Paired[:i] {
			dup = dup || q.Name == n
		}
		if apitype.ValidNodeName(n) == nil && !dup && n == p.Name && foreignIDPart(n, p.NodeID) == "" {
			continue
		}
		old := p.Name
		p.Name = "" // not a holder of its own name while it gets one
		p.Name = st.assignName(n, p.NodeID, false)
		if p.Name != old {
			changed = append(changed, fmt.Sprintf("%s: %q -> %q", p.NodeID, old, p.Name))
		}
	}
	for i := range st.Pending {
		p := &st.Pending[i]
		n := apitype.NormalizeNodeName(p.Name)
		if apitype.ValidNodeName(n) == nil && n == p.Name && !st.nameTaken(n, p.NodeID, false) && foreignIDPart(n, p.NodeID) == "" {
			continue
		}
		p.Name = ""
		p.Name = st.assignName(n, p.NodeID, true)
	}
	return changed
}

// CanonicalBinding checks a node binding an operator is about to store
// (an agent's exec defaults) and returns the form to store: an id, a
// normalised name or a canonical IP, each of which reads back as the same
// one kind. An id prefix (typed by a person) is replaced by the full id of
// the one paired node it names, so the stored binding matches by id only.
func CanonicalBinding(home, ref string) (string, error) {
	r, err := apitype.ParseNodeRef(ref)
	if err != nil {
		return "", err
	}
	if r.Kind != apitype.NodeRefPrefix {
		if r.Kind == apitype.NodeRefName {
			if err := apitype.ValidNodeName(r.Value); err != nil {
				return "", err
			}
		}
		return r.Value, nil
	}
	if len(r.Value) < apitype.MinNodePrefix {
		return "", fmt.Errorf("node %s: an id prefix needs at least %d characters; give the full id, the name or the IP", ref, apitype.MinNodePrefix)
	}
	s, err := OpenStore(home)
	if err != nil {
		return "", err
	}
	st, err := s.Read()
	if err != nil {
		return "", err
	}
	cs := st.lookup(r, true, false)
	switch len(cs) {
	case 0:
		return "", fmt.Errorf("node %s: no paired node has an id starting so; give the full id, the name or the IP", ref)
	case 1:
		return cs[0].id, nil
	}
	return "", fmt.Errorf("node %s: ambiguous id prefix (matches %s)", ref, labels(cs))
}
