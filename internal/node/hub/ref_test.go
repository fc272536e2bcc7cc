package hub

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
)

func TestParseNodeRef(t *testing.T) {
	id := "691827582ed53735090f1478"
	cases := []struct {
		in   string
		kind apitype.NodeRefKind
		val  string // "" = an error
	}{
		{id, apitype.NodeRefID, id},
		{strings.ToUpper(id), apitype.NodeRefID, id},
		{"  " + id + "\t", apitype.NodeRefID, id},
		{"id:" + id, apitype.NodeRefID, id},
		{"ID: " + strings.ToUpper(id), apitype.NodeRefID, id},
		{"id:" + id[:12], "", ""},
		{"691827582ed5", apitype.NodeRefPrefix, "691827582ed5"},
		{"691827", apitype.NodeRefPrefix, "691827"},
		{"69182", apitype.NodeRefName, "69182"}, // a name no node can hold
		{"cafe", apitype.NodeRefName, "cafe"},
		{"10.0.0.2", apitype.NodeRefIP, "10.0.0.2"},
		{"::ffff:10.0.0.2", apitype.NodeRefIP, "10.0.0.2"},
		{"::1", apitype.NodeRefIP, "::1"},
		{"fe80::1%eth0", apitype.NodeRefIP, "fe80::1%eth0"},
		{"ip:10.0.0.2", apitype.NodeRefIP, "10.0.0.2"},
		{"ip:build-1", "", ""},
		{"Build 1", apitype.NodeRefName, "build-1"},
		{"name:Build 1", apitype.NodeRefName, "build-1"},
		{"name:" + id, "", ""}, // a name can never be an id
		{"name:cafe", "", ""},
		{"10-0-0-2", apitype.NodeRefName, "10-0-0-2"},
		{"", "", ""},
		{"  ", "", ""},
		{"!!!", "", ""},
		{"\u212Aey", apitype.NodeRefName, "ey"}, // KELVIN SIGN is not a k
	}
	for _, c := range cases {
		r, err := apitype.ParseNodeRef(c.in)
		if c.val == "" {
			if err == nil {
				t.Errorf("ParseNodeRef(%q) = %v, want an error", c.in, r)
			}
			continue
		}
		if err != nil || r.Kind != c.kind || r.Value != c.val {
			t.Errorf("ParseNodeRef(%q) = %v, %v; want %s:%s", c.in, r, err, c.kind, c.val)
		}
	}
	for in, want := range map[string]string{"  My__Box (2) ": "my-box-2", "BÜILD\u00a01": "b-ild-1", "bu\u0131ld": "bu-ld", "\uff41bc": "bc", "İx": "x"} {
		if got := apitype.NormalizeNodeName(in); got != want {
			t.Errorf("NormalizeNodeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAssignName: whatever a node proposes, the name it gets is valid
// (never all hex, so never an id or an id prefix), unique among paired
// nodes and other requests, and an honest proposal is kept.
func TestAssignName(t *testing.T) {
	a, b := "aaaaaa111111111111111111", "bbbbbb222222222222222222"
	st := &State{Paired: []Paired{{NodeID: a, Name: "build-1"}}}
	cases := map[string]string{
		"Build 1":          "build-1-bbbbbb", // taken
		"web":              "web",
		a:                  "node-bbbbbb",
		strings.ToUpper(a): "node-bbbbbb",
		a[:6]:              "node-bbbbbb",
		b[:8]:              "node-bbbbbb",
		"abc":              "node-bbbbbb",
		"42":               "node-bbbbbb",
		"10.0.0.1":         "10-0-0-1",
		// A pairing request's id (which approve and remove match before
		// any name) is not a name either.
		"0a1b2c3d-0000-4000-8000-00000000ABCD": "node-bbbbbb",
		"0a1b2c3d 0000 4000 8000 00000000abcd": "node-bbbbbb",
		// Another node's fallback name or suffix (its id's first
		// characters) is not taken; the node's own is.
		"node-" + a[:6]:                  "node-bbbbbb",
		"Node " + strings.ToUpper(a[:8]): "node-bbbbbb",
		"web-" + a[:6]:                   "web",
		a[:6] + "-web":                   "web",
		"web-" + a[:6] + "-x":            "web-x",
		"node-" + b[:6]:                  "node-bbbbbb",
		"web-" + b[:12]:                  "web-" + b[:12],
		"web-cafe":                       "web-cafe",
		"":                               "node-bbbbbb",
		"\u0430\u0431":                   "node-bbbbbb", // Cyrillic only: nothing left
		strings.Repeat("x", 300):         strings.Repeat("x", apitype.MaxNodeName-len(b)-1),
	}
	for proposed, want := range cases {
		if got := st.assignName(proposed, b, true); got != want {
			t.Errorf("assignName(%q) = %q, want %q", proposed, got, want)
		}
	}
	// A request cannot take another request's name either.
	st.Pending = []Pending{{NodeID: "cccccc333333333333333333", Name: "web"}}
	if got := st.assignName("web", b, true); got != "web-bbbbbb" {
		t.Errorf("second request for web: %q", got)
	}
}

// fleet is a generated set of paired nodes for the selection property.
type fleet struct {
	h       *Hub
	nodes   []Paired
	online  map[string]bool
	removed []string
}

var ipPool = []string{"10.0.0.1", "10.0.0.2", "::1", "::ffff:10.0.0.1", "192.168.1.7", ""}

// genFleet pairs 1..7 nodes through the real pairing path (addPending,
// Approve), many of them hostile: ids ground to share a prefix with
// another node's, names proposed from other nodes' ids, prefixes, names
// and IPs, in other cases and with look-alike characters. Some are
// removed again, some go offline, some share an IP.
func genFleet(t *testing.T, rng *rand.Rand) *fleet {
	t.Helper()
	home := t.TempDir()
	h := testHub(t, home)
	var ids []string
	n := 1 + rng.Intn(7)
	var newID func() string
	newID = func() string {
		b := make([]byte, 12)
		rng.Read(b)
		id := hex.EncodeToString(b)
		if len(ids) > 0 && rng.Intn(2) == 0 {
			// A ground key: its id shares 6..23 characters with another.
			o := ids[rng.Intn(len(ids))]
			k := 6 + rng.Intn(18)
			id = o[:k] + id[k:]
		}
		for _, o := range ids {
			if o == id { // one key, one id: a duplicate is another draw
				return newID()
			}
		}
		return id
	}
	var names, ips, reqs []string
	proposal := func() string {
		pick := func(xs []string) string {
			if len(xs) == 0 {
				return "box"
			}
			return xs[rng.Intn(len(xs))]
		}
		switch rng.Intn(15) {
		case 11:
			id := pick(ids)
			return "node-" + id[:min(len(id), 6+rng.Intn(7))] // another node's fallback name
		case 12:
			id := pick(ids)
			return pick(names) + "-" + id[:min(len(id), 6+rng.Intn(7))] // another node's suffix
		case 0:
			return pick(ids)
		case 1:
			return strings.ToUpper(pick(ids))
		case 2:
			id := pick(ids)
			return id[:min(len(id), 6+rng.Intn(18))]
		case 3:
			return pick(names)
		case 4:
			return strings.ToUpper(pick(names)) + "  "
		case 5:
			return pick(ips)
		case 6:
			return "\u212A" + pick(names) // KELVIN SIGN
		case 7:
			return "id:" + pick(ids)
		case 8:
			return ""
		case 9:
			return fmt.Sprintf("%x", rng.Intn(1<<16))
		case 10:
			return pick(reqs) // another request's id
		}
		return fmt.Sprintf("build-%d", rng.Intn(4))
	}
	err := h.store.Update(func(st *State) error {
		for i := 0; i < n; i++ {
			id := newID()
			ip := ipPool[rng.Intn(len(ipPool))]
			p := st.addPending(apitype.NodeHello{NodeID: id, Name: proposal(), Caps: []string{"system.run"}}, ip, "h")
			ids, names, ips, reqs = append(ids, id), append(names, p.Name), append(ips, ip), append(reqs, p.RequestID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{h: h, online: map[string]bool{}}
	for _, id := range ids {
		if rng.Intn(5) == 0 {
			continue // stays a pairing request
		}
		p, _, err := h.store.Approve(id)
		if err != nil {
			t.Fatalf("approve %s: %v", id, err)
		}
		if rng.Intn(6) == 0 {
			if _, err := h.Remove(id); err != nil {
				t.Fatalf("remove %s: %v", id, err)
			}
			f.removed = append(f.removed, id)
			continue
		}
		if rng.Intn(4) == 0 {
			// A rename to an adversarial name is refused or harmless.
			h.Rename(id, proposal())
		}
		f.nodes = append(f.nodes, p)
		if rng.Intn(2) == 0 {
			f.online[id] = true
			h.conns[id] = &conn{hello: apitype.NodeHello{NodeID: id, Caps: []string{"system.run"}}}
		}
	}
	st, err := h.store.Read()
	if err != nil {
		t.Fatal(err)
	}
	f.nodes = st.Paired
	return f
}

// TestSelectionProperty generates fleets and checks, for every reference
// an agent's binding or call could hold (every node's id, name, IP and id
// prefixes, in other spellings too), that selection never picks a node
// the reference does not name by its own kind: a binding by id resolves
// to that node or to node_unavailable; by name, to the node holding that
// name or an error; several matches are reported, never guessed.
func TestSelectionProperty(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("CONCH_PROPERTY_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (CONCH_PROPERTY_SEED=%d reruns it; CONCH_PROPERTY_FLEETS=N tries N fleets)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	fleets := 100
	if s := os.Getenv("CONCH_PROPERTY_FLEETS"); s != "" {
		fmt.Sscan(s, &fleets)
	}
	if testing.Short() {
		fleets = 30
	}
	for i := 0; i < fleets; i++ {
		f := genFleet(t, rng)
		checkFleet(t, f)
		if t.Failed() {
			t.Fatalf("fleet %d failed (seed %d): %+v online %v removed %v", i, seed, f.nodes, f.online, f.removed)
		}
		closeHub(f.h)
	}
}

func checkFleet(t *testing.T, f *fleet) {
	t.Helper()
	st, _ := f.h.store.Read()
	// Naming rules.
	seen := map[string]string{}
	for _, p := range st.Paired {
		if err := apitype.ValidNodeName(p.Name); err != nil {
			t.Errorf("paired name %q: %v", p.Name, err)
		}
		if o, ok := seen[p.Name]; ok {
			t.Errorf("name %q held by %s and %s", p.Name, o, p.NodeID)
		}
		seen[p.Name] = p.NodeID
		for _, q := range st.Paired {
			if strings.HasPrefix(q.NodeID, p.Name) {
				t.Errorf("name %q of %s is a prefix of id %s", p.Name, p.NodeID, q.NodeID)
			}
		}
	}
	for _, p := range st.Paired {
		for _, q := range st.Pending {
			if p.Name == q.RequestID {
				t.Errorf("name %q of %s is the id of the pairing request of %s", p.Name, p.NodeID, q.NodeID)
			}
		}
	}
	for _, p := range st.Pending {
		if err := apitype.ValidNodeName(p.Name); err != nil {
			t.Errorf("pending name %q: %v", p.Name, err)
		}
		for _, q := range st.Pending {
			if p.Name == q.RequestID {
				t.Errorf("pending name %q of %s is the id of the pairing request of %s", p.Name, p.NodeID, q.NodeID)
			}
		}
		if o, ok := seen[p.Name]; ok {
			t.Errorf("pending %s holds the name %q of paired %s", p.NodeID, p.Name, o)
		}
	}
	// No name carries another node's id: every part of 6 or more hex
	// digits is a prefix of the holder's own id.
	for _, p := range st.Paired {
		if h := foreignIDPart(p.Name, p.NodeID); h != "" {
			t.Errorf("name %q of %s carries %q, not a prefix of its id", p.Name, p.NodeID, h)
		}
	}
	for _, p := range st.Pending {
		if h := foreignIDPart(p.Name, p.NodeID); h != "" {
			t.Errorf("pending name %q of %s carries %q, not a prefix of its id", p.Name, p.NodeID, h)
		}
	}
	byID := map[string]Paired{}
	for _, p := range st.Paired {
		byID[p.NodeID] = p
	}
	// Bindings by id: that node, or node_unavailable.
	ids := append([]string{}, f.removed...)
	for _, p := range st.Paired {
		ids = append(ids, p.NodeID)
	}
	for _, p := range st.Pending {
		ids = append(ids, p.NodeID)
	}
	for _, id := range ids {
		for _, q := range []string{id, strings.ToUpper(id), " " + id + " ", "id:" + id} {
			ref, aerr := f.h.Select(q)
			_, paired := byID[id]
			switch {
			case aerr == nil && ref.ID != id:
				t.Errorf("binding %q resolved to another node %s", q, ref.ID)
			case aerr == nil && !f.online[id]:
				t.Errorf("binding %q resolved to offline or unpaired %s", q, id)
			case aerr != nil && aerr.Code != apitype.CodeNodeUnavailable:
				t.Errorf("binding %q: %s %s, want that node or node_unavailable", q, aerr.Code, aerr.Message)
			case aerr != nil && paired && f.online[id]:
				t.Errorf("binding %q: online node not selected: %s", q, aerr.Message)
			}
		}
	}
	// Every reference derived from the fleet: the node selected is one
	// the reference names by its kind; ambiguity is reported.
	var queries []string
	for _, p := range st.Paired {
		queries = append(queries, p.Name, strings.ToUpper(p.Name), " "+p.Name+"\t", "name:"+p.Name, p.RemoteIP, "ip:"+p.RemoteIP)
		for k := 6; k < len(p.NodeID); k += 3 {
			queries = append(queries, p.NodeID[:k], strings.ToUpper(p.NodeID[:k]))
		}
	}
	for _, p := range st.Pending {
		queries = append(queries, p.Name, p.RequestID)
	}
	queries = append(queries, ipPool...)
	for _, q := range queries {
		r, perr := apitype.ParseNodeRef(q)
		for _, operator := range []bool{false, true} {
			ref, aerr := f.h.selectNode(q, operator)
			if perr != nil {
				if aerr == nil && strings.TrimSpace(q) != "" {
					t.Errorf("unparsable %q selected %s", q, ref.ID)
				}
				continue
			}
			var want []Paired
			for _, p := range st.Paired {
				switch r.Kind {
				case apitype.NodeRefID:
					if p.NodeID == r.Value {
						want = append(want, p)
					}
				case apitype.NodeRefName:
					if p.Name == r.Value {
						want = append(want, p)
					}
				case apitype.NodeRefIP:
					if p.RemoteIP != "" && apitype.CanonicalIP(p.RemoteIP) == r.Value {
						want = append(want, p)
					}
				case apitype.NodeRefPrefix:
					if operator && len(r.Value) >= apitype.MinNodePrefix && strings.HasPrefix(p.NodeID, r.Value) {
						want = append(want, p)
					}
				}
			}
			switch {
			case len(want) > 1:
				if aerr == nil || aerr.Code != apitype.CodeNodeAmbiguous {
					t.Errorf("%q (operator %v) names %d nodes: got %v %v, want node_ambiguous", q, operator, len(want), ref.ID, aerr)
				}
			case len(want) == 1:
				w := want[0]
				if aerr == nil && ref.ID != w.NodeID {
					t.Errorf("%q (operator %v) selected %s, names %s", q, operator, ref.ID, w.NodeID)
				}
				if aerr == nil && !f.online[w.NodeID] || aerr != nil && (f.online[w.NodeID] || aerr.Code != apitype.CodeNodeUnavailable) {
					t.Errorf("%q (operator %v) for %s (online %v): %v %v", q, operator, w.NodeID, f.online[w.NodeID], ref.ID, aerr)
				}
			default:
				if aerr == nil {
					t.Errorf("%q (operator %v, kind %s) names no node but selected %s", q, operator, r.Kind, ref.ID)
				}
			}
		}
		// The operator commands resolve the same way (pending too).
		if c, err := st.resolve(q, true, true); err == nil {
			if !resolvedBy(st, q, c) {
				t.Errorf("operator %q resolved to %s (%q), which it does not name", q, c.id, c.name)
			}
		} else if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrAmbiguous) {
			t.Errorf("operator %q: %v", q, err)
		}
	}
}

// resolvedBy reports whether q names c by exactly one kind.
func resolvedBy(st *State, q string, c cand) bool {
	for _, p := range st.Pending {
		if p.RequestID == q {
			return p.NodeID == c.id
		}
	}
	r, err := apitype.ParseNodeRef(q)
	if err != nil {
		return false
	}
	switch r.Kind {
	case apitype.NodeRefID:
		return c.id == r.Value
	case apitype.NodeRefName:
		return c.name == r.Value
	case apitype.NodeRefPrefix:
		return len(r.Value) >= apitype.MinNodePrefix && strings.HasPrefix(c.id, r.Value)
	case apitype.NodeRefIP:
		for _, p := range st.Paired {
			if p.NodeID == c.id {
				return apitype.CanonicalIP(p.RemoteIP) == r.Value
			}
		}
		for _, p := range st.Pending {
			if p.NodeID == c.id {
				return apitype.CanonicalIP(p.RemoteIP) == r.Value
			}
		}
	}
	return false
}

// TestLegacyNamesRewritten: a pairing state from before the naming rules
// (a node named with another node's id, duplicated names) is repaired
// when the hub opens it, before any lookup.
func TestLegacyNamesRewritten(t *testing.T) {
	home := t.TempDir()
	a, b, c, d := "aaaaaa111111111111111111", "bbbbbb222222222222222222", "cccccc333333333333333333", "dddddd444444444444444444"
	os.MkdirAll(filepath.Join(home, "nodes"), 0o700)
	fsutil.WriteJSON(filepath.Join(home, "nodes", "paired.json"), []Paired{
		{NodeID: a, Name: "n1"}, {NodeID: b, Name: a}, {NodeID: c, Name: "n1"}, {NodeID: d, Name: "node-aaaaaa"},
	})
	h := testHub(t, home)
	st, _ := h.store.Read()
	got := map[string]string{}
	for _, p := range st.Paired {
		got[p.NodeID] = p.Name
	}
	if got[a] != "n1" || got[b] != "node-bbbbbb" || got[c] != "n1-cccccc" || got[d] != "node-dddddd" {
		t.Fatalf("names after repair: %v", got)
	}
	h.conns[a] = &conn{hello: apitype.NodeHello{NodeID: a, Caps: []string{"system.run"}}}
	h.conns[b] = &conn{hello: apitype.NodeHello{NodeID: b, Caps: []string{"system.run"}}}
	if ref, aerr := h.Select(a); aerr != nil || ref.ID != a {
		t.Fatalf("select by id: %+v %v", ref, aerr)
	}
}

// TestOperatorLookup: operator commands take one kind of reference, a
// prefix only from apitype.MinNodePrefix characters, and report
// ambiguity; a rename cannot take a name that looks like an id.
func TestOperatorLookup(t *testing.T) {
	h := testHub(t, t.TempDir())
	a, b := "abcdef111111111111111111", "abcdef111111222222222222"
	h.store.Update(func(st *State) error {
		st.addPending(apitype.NodeHello{NodeID: a, Name: "n1"}, "10.0.0.1", "h")
		st.addPending(apitype.NodeHello{NodeID: b, Name: a}, "10.0.0.1", "h")
		return nil
	})
	if _, err := h.Approve(a); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Approve("node-abcdef"); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]error{
		"abcdef":       ErrNotFound, // too short
		"abcdef11":     ErrNotFound,
		"abcdef111111": ErrAmbiguous,
		"10.0.0.1":     ErrAmbiguous,
		"nosuch":       ErrNotFound,
	} {
		if _, err := h.Rename(q, "x"); !errors.Is(err, want) {
			t.Errorf("rename %q: %v, want %v", q, err, want)
		}
	}
	for _, bad := range []string{a, a[:8], "beef", "42", "  ", "\u0430", "0a1b2c3d-0000-4000-8000-00000000abcd", "node-123456", "web-abcdef2"} {
		if _, err := h.Rename(a, bad); err == nil {
			t.Errorf("rename to %q accepted", bad)
		}
	}
	if _, err := h.Rename(a, "node-abcdef"); !errors.Is(err, ErrNameTaken) {
		t.Errorf("rename to a taken name: %v", err)
	}
	if p, err := h.Rename("abcdef1111112", "Build 1"); err != nil || p.NodeID != b || p.Name != "build-1" {
		t.Errorf("rename by prefix: %+v %v", p, err)
	}
	if id, err := h.Remove(strings.ToUpper(a)); err != nil || id != a {
		t.Errorf("remove by upper-case id: %q %v", id, err)
	}
	// A binding stored by prefix is refused; typed by a person, it is
	// stored as the full id.
	if _, err := CanonicalBinding(h.opt.Home, "abcdef11"); err == nil {
		t.Errorf("short prefix binding accepted")
	}
	if got, err := CanonicalBinding(h.opt.Home, "ABCDEF111111"); err != nil || got != b {
		t.Errorf("prefix binding: %q %v", got, err)
	}
	if got, err := CanonicalBinding(h.opt.Home, " Build 1 "); err != nil || got != "build-1" {
		t.Errorf("name binding: %q %v", got, err)
	}
	if _, err := CanonicalBinding(h.opt.Home, "name:cafe"); err == nil {
		t.Errorf("hex name binding accepted")
	}
}

// testHub opens a hub whose "connected" nodes are stand-ins (no
// WebSocket: selection only reads their hello).
func testHub(t *testing.T, home string) *Hub {
	t.Helper()
	h, err := New(Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeHub(h) })
	return h
}

func closeHub(h *Hub) {
	h.mu.Lock()
	h.conns = map[string]*conn{}
	h.mu.Unlock()
	h.Close()
}

// TestApproveKeepsRequestNames: the name a request gets at approval is
// held by no other request either (found by TestSelectionProperty).
func TestApproveKeepsRequestNames(t *testing.T) {
	h := testHub(t, t.TempDir())
	a, b, c := "aaaaaa111111111111111111", "bbbbbb222222222222222222", "cccccc333333333333333333"
	exp := time.Now().Add(time.Hour).UnixMilli()
	h.store.Update(func(st *State) error {
		st.Paired = []Paired{{NodeID: a, Name: "web"}}
		st.Pending = []Pending{{RequestID: "r1", NodeID: b, Name: "web", ExpiresAtMs: exp}, {RequestID: "r2", NodeID: c, Name: "web-bbbbbb", ExpiresAtMs: exp}}
		return nil
	})
	p, _, err := h.store.Approve(b)
	if err != nil || p.Name != "web-bbbbbb222222" {
		t.Fatalf("approve: %+v %v", p, err)
	}
}
