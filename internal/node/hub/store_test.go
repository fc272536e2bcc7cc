package hub

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

func TestStoreInvitesAndApprove(t *testing.T) {
	home := t.TempDir()
	s, err := OpenStore(home)
	if err != nil {
		t.Fatal(err)
	}
	tok, exp, err := s.CreateInvite(time.Hour, true)
	if err != nil || !strings.HasPrefix(tok, "cnj_") || exp <= time.Now().UnixMilli() {
		t.Fatalf("invite: %q %d %v", tok, exp, err)
	}
	b, _ := os.ReadFile(filepath.Join(home, "nodes", "invites.json"))
	if strings.Contains(string(b), tok) || !strings.Contains(string(b), TokenHash(tok)) {
		t.Fatalf("invites.json: %s", b)
	}
	if fi, _ := os.Stat(filepath.Join(home, "nodes", "invites.json")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("invites.json mode %v", fi.Mode())
	}
	add := func(id, name string) {
		s.Update(func(st *State) error {
			st.Pending = append(st.Pending, Pending{RequestID: "r-" + id, NodeID: id, Name: name, ExpiresAtMs: time.Now().Add(time.Hour).UnixMilli()})
			return nil
		})
	}
	add("aaaaaa111111111111111111", "Twin")
	add("aaaaaa222222222222222222", "Twin")
	if _, _, err := s.Approve("twin"); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("ambiguous name: %v", err)
	}
	if _, _, err := s.Approve("nosuch"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	// The other request still holds "twin" (a state from before requests
	// had unique names): the first approved gets the suffix.
	p, nt, err := s.Approve("aaaaaa111111")
	if err != nil || p.Name != "twin-aaaaaa" || !strings.HasPrefix(nt, "cnt_") || p.TokenHash != TokenHash(nt) {
		t.Fatalf("approve: %+v %q %v", p, nt, err)
	}
	p2, _, err := s.Approve("AAAAAA222222")
	if err != nil || p2.Name != "twin" {
		t.Fatalf("second approve keeps names unique: %+v %v", p2, err)
	}
	// Expired requests disappear.
	s.Update(func(st *State) error {
		st.Pending = append(st.Pending, Pending{RequestID: "old", NodeID: "bbbbbb", ExpiresAtMs: time.Now().Add(-time.Second).UnixMilli()})
		return nil
	})
	st, _ := s.Read()
	if len(st.Pending) != 0 || len(st.Paired) != 2 {
		t.Fatalf("state: %+v", st)
	}
}

func TestNodeOutputFrame(t *testing.T) {
	in := apitype.NodeOutput{RunID: "r", SessionID: "s", Stream: "stderr", Cursor: 42, Data: []byte("a\x00b\nc")}
	out, err := apitype.DecodeNodeOutput(apitype.EncodeNodeOutput(in))
	if err != nil || out.RunID != "r" || out.SessionID != "s" || out.Stream != "stderr" || out.Cursor != 42 || string(out.Data) != "a\x00b\nc" {
		t.Fatalf("round trip: %+v %v", out, err)
	}
	for _, bad := range [][]byte{nil, {0, 0}, {0, 0, 0, 9, '{'}, {0, 0, 0, 1, 'x'}} {
		if _, err := apitype.DecodeNodeOutput(bad); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
}

// TestRestoreRouteOfRemovedNode: a route left in nodes/sessions.json for
// a node that is no longer paired (removed while no gateway ran, or by an
// earlier conch) is not mirrored for ever: the session ends as lost, with
// the reason, and the route is dropped.
func TestRestoreRouteOfRemovedNode(t *testing.T) {
	home := t.TempDir()
	paired, gone := "aaaaaa111111111111111111", "bbbbbb222222222222222222"
	s, _ := OpenStore(home)
	for sid, node := range map[string]string{"s-kept": paired, "s-gone": gone} {
		dir := proto.SessionDir(home, sid)
		os.MkdirAll(dir, 0o700)
		if err := fsutil.WriteJSON(proto.MetaPath(dir), proto.Meta{ID: sid, Host: "node", NodeID: node, State: "running", Socket: filepath.Join(dir, "s")}); err != nil {
			t.Fatal(err)
		}
	}
	s.Update(func(st *State) error {
		st.Paired = []Paired{{NodeID: paired, Name: "kept"}}
		st.Routes["s-kept"] = Route{NodeID: paired, Agent: "main"}
		st.Routes["s-gone"] = Route{NodeID: gone, Agent: "main"}
		return nil
	})
	h := testHub(t, home)
	ex, ok, _ := proto.ReadExit(proto.SessionDir(home, "s-gone"))
	if !ok || !ex.Final || ex.State != proto.StateLost || !strings.Contains(ex.Reason, "removed") {
		t.Fatalf("session of a removed node: %+v %v", ex, ok)
	}
	if _, ok, _ := proto.ReadExit(proto.SessionDir(home, "s-kept")); ok {
		t.Fatalf("session of a paired node ended")
	}
	st, _ := h.store.Read()
	if _, ok := st.Routes["s-gone"]; ok {
		t.Fatalf("route of a removed node kept: %v", st.Routes)
	}
	if _, ok := st.Routes["s-kept"]; !ok {
		t.Fatalf("route of a paired node dropped: %v", st.Routes)
	}
}
