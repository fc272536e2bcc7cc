package auth

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestDamagedAgentsFileGrantsNothing: an agents.json that does not parse
// (a crash mid-edit by hand, a bit flipped) makes every lookup fail and
// every change refuse, with an error naming the file; it is never
// overwritten, so no agent is silently lost. Its members are generated:
// the good file cut at every length, and each byte of it flipped (a flip
// in the "agents" key used to parse as a file with no agents, which the
// next Add rewrote without alpha).
func TestDamagedAgentsFileGrantsNothing(t *testing.T) {
	home := t.TempDir()
	s := Open(home)
	tok, err := s.Add("alpha", "/w")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, "agents.json")
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var damaged [][]byte
	for n := 0; n < len(good)-2; n++ { // the last bytes are "}\n"
		damaged = append(damaged, good[:n])
	}
	for i := range good {
		b := append([]byte(nil), good...)
		b[i] ^= 0x80 // a byte the store never writes (agents.json is ASCII)
		damaged = append(damaged, b)
	}
	for _, b := range damaged {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s := Open(home) // no cache of the good file
		if _, err := s.List(); err == nil {
			t.Errorf("List of a damaged file (%q…) succeeded", head(b))
		}
		if id, ok := s.Lookup(tok); ok {
			t.Errorf("a damaged agents.json (%q…) still grants %s", head(b), id)
		}
		if _, err := s.Add("beta", ""); err == nil {
			t.Errorf("Add over a damaged file (%q…) succeeded", head(b))
		}
		after, _ := os.ReadFile(p)
		if string(after) != string(b) {
			t.Fatalf("a damaged agents.json was rewritten:\n%q\nbecame\n%q", b, after)
		}
	}
}

func head(b []byte) string {
	if len(b) > 24 {
		return string(b[:24])
	}
	return string(b)
}

// TestStateFileModes: the home the store makes is 0700; agents.json is
// 0600 after every write, even when someone made it readable meanwhile;
// the operator token is 0600.
func TestStateFileModes(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	s := Open(home)
	if s.Exists() {
		t.Fatal("Exists before any agent")
	}
	if _, err := s.Add("alpha", ""); err != nil {
		t.Fatal(err)
	}
	if !s.Exists() {
		t.Fatal("Exists after Add")
	}
	if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("home %v %v, want 0700", fi.Mode(), err)
	}
	p := filepath.Join(home, "agents.json")
	os.Chmod(p, 0o644)
	if _, err := s.Rotate("alpha"); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("agents.json is %v after a rotation, want 0600", fi.Mode().Perm())
	}
	if _, err := OperatorToken(home); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(OperatorTokenPath(home)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("operator.token is %v, want 0600", fi.Mode().Perm())
	}
	if _, err := s.Get("nobody"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Get of an unknown agent: %v", err)
	}
}
