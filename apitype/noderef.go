package apitype

import (
	"fmt"
	"net/netip"
	"strings"
)

// A node reference names a node by exactly one kind: its id, its name, the
// IP it connected from, or (only where an operator types it) a prefix of
// its id. The kind is decided by the reference's form, or spelt out with
// "id:", "name:" or "ip:"; since no name can look like an id, an id
// prefix or an IP (ValidNodeName), no reference can be read as two kinds.
type NodeRefKind string

const (
	NodeRefID     NodeRefKind = "id"
	NodeRefName   NodeRefKind = "name"
	NodeRefIP     NodeRefKind = "ip"
	NodeRefPrefix NodeRefKind = "prefix"
)

// NodeIDLen is the length of a node id (24 lowercase hex characters).
const NodeIDLen = 24

// MinNodePrefix is the shortest id prefix an operator command accepts:
// grinding a key whose id shares 12 hex characters with another node's
// takes about 2^47 tries. Exec bindings never match prefixes.
const MinNodePrefix = 12

// MaxNodeName bounds a normalised node name.
const MaxNodeName = 63

// NodeRefOf is a parsed node reference.
type NodeRefOf struct {
	Kind  NodeRefKind
	Value string // id: lowercase; name: normalised; ip: canonical; prefix: lowercase
}

func (r NodeRefOf) String() string { return string(r.Kind) + ":" + r.Value }

// IsHex reports whether s is non-empty and only hex digits (either case).
func IsHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// ValidNodeID reports whether s is a node id (24 lowercase hex).
func ValidNodeID(s string) bool {
	return len(s) == NodeIDLen && IsHex(s) && strings.ToLower(s) == s
}

// CanonicalIP returns the canonical text of an IP address (IPv4-mapped
// IPv6 addresses unmapped, zones kept), or "" when s is not one.
func CanonicalIP(s string) string {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return ""
	}
	return a.Unmap().String()
}

// ParseNodeRef reads a node reference. A bare reference of 24 hex
// characters is an id; one that parses as an IP address is an IP; one of
// 6 or more hex characters otherwise is an id prefix; anything else is a
// name (normalised). "id:", "name:" and "ip:" force the kind.
func ParseNodeRef(s string) (NodeRefOf, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return NodeRefOf{}, fmt.Errorf("empty node reference")
	}
	if k, v, ok := strings.Cut(s, ":"); ok {
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "id":
			if l := strings.ToLower(v); ValidNodeID(l) {
				return NodeRefOf{NodeRefID, l}, nil
			}
			return NodeRefOf{}, fmt.Errorf("invalid node id %q: an id is %d hex characters", v, NodeIDLen)
		case "name":
			n := NormalizeNodeName(v)
			if err := ValidNodeName(n); err != nil {
				return NodeRefOf{}, err
			}
			return NodeRefOf{NodeRefName, n}, nil
		case "ip":
			if ip := CanonicalIP(v); ip != "" {
				return NodeRefOf{NodeRefIP, ip}, nil
			}
			return NodeRefOf{}, fmt.Errorf("invalid node IP %q", v)
		}
		// Not a kind: an IPv6 address, or a name with a colon.
	}
	if l := strings.ToLower(s); ValidNodeID(l) {
		return NodeRefOf{NodeRefID, l}, nil
	}
	if ip := CanonicalIP(s); ip != "" {
		return NodeRefOf{NodeRefIP, ip}, nil
	}
	if IsHex(s) && len(s) >= 6 {
		return NodeRefOf{NodeRefPrefix, strings.ToLower(s)}, nil
	}
	n := NormalizeNodeName(s)
	if n == "" {
		return NodeRefOf{}, fmt.Errorf("invalid node reference %q", s)
	}
	// A name that could never be given (all hex) still reads as a name: it
	// matches no node.
	return NodeRefOf{NodeRefName, n}, nil
}

// IsRequestIDForm reports whether s has the form of a pairing request's
// id (8-4-4-4-12 hex digits), which operator commands match before any
// node reference.
func IsRequestIDForm(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) != 5 {
		return false
	}
	for i, n := range []int{8, 4, 4, 4, 12} {
		if len(parts[i]) != n || !IsHex(parts[i]) {
			return false
		}
	}
	return true
}

// ValidNodeName checks a normalised node name: non-empty, at most
// MaxNodeName characters, not made only of hex digits (such a name
// could be read as an id or an id prefix, of this node or any other,
// now or later), and not of the form of a pairing request's id. Normalised names hold only [a-z0-9-], so they never
// read as IP addresses either.
func ValidNodeName(n string) error {
	switch {
	case n == "":
		return fmt.Errorf("invalid node name: it needs a letter or digit")
	case len(n) > MaxNodeName:
		return fmt.Errorf("invalid node name: longer than %d characters", MaxNodeName)
	case IsHex(n):
		return fmt.Errorf("invalid node name %q: a name made only of hex digits could be taken for a node id", n)
	case IsRequestIDForm(n):
		return fmt.Errorf("invalid node name %q: it has the form of a pairing request's id", n)
	case n != NormalizeNodeName(n):
		return fmt.Errorf("invalid node name %q", n)
	}
	return nil
}

// ValidNodeBinding checks a stored node binding (a config file's
// tools.exec.node, an agent's exec defaults): a reference a run can
// match, so not an id prefix (runs never match prefixes) and not a name
// no node can hold.
func ValidNodeBinding(s string) error {
	r, err := ParseNodeRef(s)
	if err != nil {
		return err
	}
	switch r.Kind {
	case NodeRefPrefix:
		return fmt.Errorf("%q is an id prefix, which a binding never matches: give the node's full id (%d hex characters), its name or its IP", strings.TrimSpace(s), NodeIDLen)
	case NodeRefName:
		return ValidNodeName(r.Value)
	}
	return nil
}
