package apitype

import (
	"strings"
	"testing"
)

// checkNodeRef checks the one-kind property of a node reference: what
// ParseNodeRef accepts has a valid kind and a canonical value, reads back
// as itself from its String() form and (except a name no node can hold)
// from its bare value, so no reference can be read as two kinds.
func checkNodeRef(t *testing.T, s string) {
	t.Helper()
	r, err := ParseNodeRef(s)
	if err != nil {
		if err.Error() == "" {
			t.Errorf("%q: empty error", s)
		}
		return
	}
	switch r.Kind {
	case NodeRefID:
		if !ValidNodeID(r.Value) {
			t.Errorf("%q: id %q is not an id", s, r.Value)
		}
	case NodeRefPrefix:
		if !IsHex(r.Value) || len(r.Value) < 6 || strings.ToLower(r.Value) != r.Value || ValidNodeID(r.Value) {
			t.Errorf("%q: bad prefix %q", s, r.Value)
		}
	case NodeRefIP:
		if CanonicalIP(r.Value) != r.Value {
			t.Errorf("%q: IP %q is not canonical", s, r.Value)
		}
	case NodeRefName:
		if NormalizeNodeName(r.Value) != r.Value || r.Value == "" {
			t.Errorf("%q: name %q is not normalised", s, r.Value)
		}
		if ValidNodeName(r.Value) != nil {
			return // a name no node holds: it matches nothing
		}
	default:
		t.Fatalf("%q: kind %q", s, r.Kind)
	}
	if r.Kind != NodeRefPrefix {
		if back, err := ParseNodeRef(r.String()); err != nil || back != r {
			t.Errorf("%q → %v; its form %q reads as %v, %v", s, r, r.String(), back, err)
		}
	}
	if back, err := ParseNodeRef(r.Value); err != nil || back != r {
		t.Errorf("%q → %v; its bare value reads as %v, %v", s, r, back, err)
	}
}

// TestNodeRefGenerated crosses the forms of each kind (id, prefix, IPv4,
// IPv6, mapped, zoned, names with every separator) with the kind
// prefixes, cases and padding.
func TestNodeRefGenerated(t *testing.T) {
	id := "0123456789abcdef01234567"
	bases := []string{id, strings.ToUpper(id), id[:12], id[:6], id[:5], id + "0", "1.2.3.4", "::1", "::ffff:1.2.3.4",
		"fe80::1%eth0", "2001:db8::1", "build-box", "Build Box", "box_1", "a", "ab-12", "deadbeef-dead-beef-dead-beefdeadbeef",
		"x" + strings.Repeat("a", 62), "x" + strings.Repeat("a", 63), "über", "\u0430bc", "--", "", " ", "1.2.3", "ffff",
		"name", "id", "ip", "a:b", "0x1f", "1e10", "caf\u00e9", "\x00", "\xff\xfe", "node\u200b1"}
	n := 0
	for _, b := range bases {
		for _, p := range []string{"", "id:", "name:", "ip:", "ID:", " Name : ", "ip: ", "prefix:", ":"} {
			for _, s := range []string{p + b, " " + p + b + "\t"} {
				checkNodeRef(t, s)
				n++
			}
		}
	}
	if n < 500 {
		t.Fatalf("only %d references", n)
	}
}

// go test ./apitype -run '^$' -fuzz FuzzNodeRef -fuzztime 1m
func FuzzNodeRef(f *testing.F) {
	for _, s := range []string{"0123456789abcdef01234567", "name:box", "ip:::ffff:10.0.0.1", "abcdef", "fe80::1%eth0", "id:x"} {
		f.Add(s)
	}
	f.Fuzz(checkNodeRef)
}
