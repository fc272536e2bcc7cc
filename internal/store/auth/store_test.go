package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestTokensAreScoped: an agent token names its agent and no other; an
// operator token, another agent's token, a token one character off, with
// the wrong prefix, or empty names none. The near misses are generated
// from the real token, one change per position.
func TestTokensAreScoped(t *testing.T) {
	home := t.TempDir()
	s := Open(home)
	a, err := s.Add("alpha", "/w/a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Add("beta", "")
	if err != nil {
		t.Fatal(err)
	}
	op, err := OperatorToken(home)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{a: "alpha", b: "beta"} {
		if got, ok := s.Lookup(tok); !ok || got != want {
			t.Fatalf("Lookup(%s…) = %q %v, want %s", tok[:8], got, ok, want)
		}
	}
	misses := []string{"", "cat_", op, strings.TrimPrefix(a, "cat_"), "cop_" + strings.TrimPrefix(a, "cat_"), a + "x", a[:len(a)-1], " " + a}
	for i := 4; i < len(a); i++ {
		c := byte('A')
		if a[i] == 'A' {
			c = 'B'
		}
		misses = append(misses, a[:i]+string(c)+a[i+1:])
	}
	for _, tok := range misses {
		if id, ok := s.Lookup(tok); ok {
			t.Errorf("Lookup(%q) = %s, want no agent", tok, id)
		}
	}
	if !Equal(op, op) || Equal(op, op[:len(op)-1]) || Equal(op, "") {
		t.Error("Equal is not exact")
	}
}

// TestRotateAndRemove: rotating a token makes the old one fail at once
// and the new one work, for that agent only; removing an agent ends its
// token; unknown agents and bad ids are refused with their sentinels.
func TestRotateAndRemove(t *testing.T) {
	s := Open(t.TempDir())
	old, err := s.Add("alpha", "")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := s.Add("beta", "")
	fresh, err := s.Rotate("alpha")
	if err != nil || fresh == old || !strings.HasPrefix(fresh, "cat_") || len(fresh) != 4+43 {
		t.Fatalf("Rotate: %q %v", fresh, err)
	}
	if _, ok := s.Lookup(old); ok {
		t.Error("the old token still works after Rotate")
	}
	if id, ok := s.Lookup(fresh); !ok || id != "alpha" {
		t.Errorf("the new token: %q %v", id, ok)
	}
	if id, _ := s.Lookup(other); id != "beta" {
		t.Error("rotating alpha changed beta's token")
	}
	if err := s.Remove("alpha"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Lookup(fresh); ok {
		t.Error("a removed agent's token still works")
	}
	if _, err := s.Rotate("alpha"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Rotate of a removed agent: %v", err)
	}
	if err := s.Remove("alpha"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Remove twice: %v", err)
	}
	if _, err := s.Add("beta", ""); !errors.Is(err, ErrExists) {
		t.Errorf("Add of an existing agent: %v", err)
	}
	for _, bad := range []string{"", "Alpha", "-a", "a b", "a/b", strings.Repeat("a", 65), "../x"} {
		if _, err := s.Add(bad, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("Add(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

// TestStoreFileHoldsHashesOnly: agents.json is 0600, holds no token, and
// a second Store of the same home (another process) sees every change.
func TestStoreFileHoldsHashesOnly(t *testing.T) {
	home := t.TempDir()
	s := Open(home)
	tok, err := s.Add("alpha", "/w")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, "agents.json")
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("agents.json: %v %v", fi.Mode(), err)
	}
	b, _ := os.ReadFile(p)
	if strings.Contains(string(b), strings.TrimPrefix(tok, "cat_")) {
		t.Fatal("agents.json holds the token")
	}
	other := Open(home)
	fresh, err := other.Rotate("alpha")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Lookup(tok); ok {
		t.Error("a store kept the old token after another store rotated it")
	}
	if id, ok := s.Lookup(fresh); !ok || id != "alpha" {
		t.Error("a store did not see another store's rotation")
	}
	if a, err := s.Get("alpha"); err != nil || a.Workspace != "/w" || a.ID != "alpha" {
		t.Errorf("Get: %+v %v", a, err)
	}
}

// TestConcurrentAdds: agents added at once from several stores of one
// home are all kept (the flock serialises the writers).
func TestConcurrentAdds(t *testing.T) {
	home := t.TempDir()
	const n = 16
	toks := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := Open(home).Add("agent-"+string(rune('a'+i)), "")
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		}()
	}
	wg.Wait()
	s := Open(home)
	list, err := s.List()
	if err != nil || len(list) != n {
		t.Fatalf("List: %d agents, %v", len(list), err)
	}
	for i, tok := range toks {
		if id, ok := s.Lookup(tok); !ok || id != "agent-"+string(rune('a'+i)) {
			t.Errorf("token %d: %q %v", i, id, ok)
		}
	}
}
