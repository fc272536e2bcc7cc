package approvals

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newStore(t *testing.T) (*Store, *time.Time) {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "home"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_700_000_000_000)
	s.Now = func() time.Time { return now }
	return s, &now
}

func TestStoreLifecycle(t *testing.T) {
	s, now := newStore(t)
	st, err := os.Stat(s.dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("approvals dir mode %v %v", st.Mode(), err)
	}
	r, err := s.Create(Request{
		Agent: "main", SessionID: "calm-gulf", RequestID: "req1", Host: "gateway",
		Command: "curl -s example.com | head", Cwd: "/w", EnvKeys: []string{"HOME"},
		Segments: []Segment{{Text: "curl -s example.com", Exe: "/usr/bin/curl", Verdict: "miss"}},
		Reason:   "allowlist miss", Persist: []string{"/usr/bin/curl"},
		State: Denied, DecidedBy: "ignored",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !isUUID(r.ID) || r.Slug != r.ID[:8] || r.State != Pending || r.DecidedBy != "" ||
		r.CreatedAtMs != now.UnixMilli() || r.ExpiresAtMs != now.UnixMilli()+120000 {
		t.Fatalf("created %+v", r)
	}
	st, err = os.Stat(s.path(r.ID))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("record mode %v %v", st.Mode(), err)
	}

	for _, key := range []string{r.ID, r.Slug, strings.ToUpper(r.Slug)} {
		got, err := s.Get(key)
		if err != nil || got.ID != r.ID || got.Segments[0].Exe != "/usr/bin/curl" {
			t.Fatalf("Get(%q) = %+v, %v", key, got, err)
		}
	}
	for _, key := range []string{"", "0000000", "../../x", "00000000", r.ID[:7], r.ID + "0"} {
		if _, err := s.Get(key); !errors.Is(err, ErrUnknown) || err.Error() != "unknown approval id" {
			t.Fatalf("Get(%q) err = %v, want ErrUnknown", key, err)
		}
	}
	if _, err := s.Decide("deadbeef", Deny, "op"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Decide unknown: %v", err)
	}
	if _, err := s.Consume(r.Slug); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("Consume pending: %v", err)
	}

	*now = now.Add(time.Second)
	d, err := s.Decide(r.Slug, AllowOnce, "operator")
	if err != nil {
		t.Fatal(err)
	}
	if d.State != Allowed || d.Decision != AllowOnce || d.DecidedBy != "operator" || d.DecidedAtMs != now.UnixMilli() {
		t.Fatalf("decided %+v", d)
	}
	_, err = s.Decide(r.ID, Deny, "someone else")
	var are *AlreadyResolvedError
	if !errors.As(err, &are) || !errors.Is(err, ErrAlreadyResolved) {
		t.Fatalf("second decision: %v", err)
	}
	if want := "approval " + r.Slug + " already resolved (allow-once)"; err.Error() != want {
		t.Fatalf("text %q, want %q", err, want)
	}
	if _, err := s.Decide(r.ID, Decision("maybe"), "op"); err == nil {
		t.Fatal("invalid decision accepted")
	}

	c, err := s.Consume(r.Slug)
	if err != nil || c.State != Consumed || c.ConsumedAtMs != now.UnixMilli() {
		t.Fatalf("consume: %+v %v", c, err)
	}
	if _, err := s.Consume(r.Slug); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("second consume: %v", err)
	}

	// Expiry.
	e1, _ := s.Create(Request{Agent: "main", ExpiresAtMs: now.UnixMilli() + 10})
	e2, _ := s.Create(Request{Agent: "main", ExpiresAtMs: now.UnixMilli() + 10_000})
	*now = now.Add(20 * time.Millisecond)
	if _, err := s.Decide(e1.Slug, AllowOnce, "late"); err == nil || err.Error() != "approval "+e1.Slug+" already resolved (expired)" {
		t.Fatalf("decision after expiry: %v", err)
	}
	exp, err := s.Expire(*now)
	if err != nil || len(exp) != 1 || exp[0].ID != e1.ID || exp[0].State != Expired {
		t.Fatalf("expire: %+v %v", exp, err)
	}
	if exp, _ := s.Expire(*now); len(exp) != 0 {
		t.Fatalf("second expire returned %d", len(exp))
	}
	pending, _ := s.List(Pending)
	all, _ := s.List("")
	if len(pending) != 1 || pending[0].ID != e2.ID || len(all) != 3 {
		t.Fatalf("list: %d pending, %d all", len(pending), len(all))
	}

	// Prune keeps pending and recently resolved records.
	if n, err := s.Prune(now.Add(-time.Second)); err != nil || n != 0 {
		t.Fatalf("prune early: %d %v", n, err)
	}
	if n, err := s.Prune(now.Add(time.Millisecond)); err != nil || n != 2 {
		t.Fatalf("prune: %d %v", n, err)
	}
	if all, _ := s.List(""); len(all) != 1 || all[0].ID != e2.ID {
		t.Fatalf("after prune: %v", all)
	}
	if left, _ := filepath.Glob(filepath.Join(s.dir, "*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestStoreSkipsCorruptRecords(t *testing.T) {
	s, _ := newStore(t)
	r, _ := s.Create(Request{Agent: "main"})
	os.WriteFile(filepath.Join(s.dir, "00000000-0000-4000-8000-000000000000.json"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(s.dir, "notes.json"), []byte("{}"), 0o600)
	list, err := s.List("")
	if err != nil || len(list) != 1 || list[0].ID != r.ID {
		t.Fatalf("list: %v %v", list, err)
	}
}
