package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOperatorTokenRefusesPartialFiles writes every prefix of a valid
// token file (what a write cut short leaves) and checks that only the
// whole token is accepted; the others are refused with an error naming
// the file, never returned as a token.
func TestOperatorTokenRefusesPartialFiles(t *testing.T) {
	home := t.TempDir()
	tok, err := OperatorToken(home)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(OperatorTokenPath(home))
	if err != nil || string(whole) != tok+"\n" {
		t.Fatalf("token file %q, %v", whole, err)
	}
	if fi, _ := os.Stat(OperatorTokenPath(home)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %o", fi.Mode().Perm())
	}
	for n := 0; n <= len(whole); n++ {
		os.WriteFile(OperatorTokenPath(home), whole[:n], 0o600)
		got, err := ReadOperatorToken(home)
		complete := n >= len(tok)
		if complete && (err != nil || got != tok) {
			t.Fatalf("prefix %d: %q %v", n, got, err)
		}
		if !complete && (err == nil || got != "" || !strings.Contains(err.Error(), "operator.token is")) {
			t.Fatalf("prefix %d (%q) accepted: %q %v", n, whole[:n], got, err)
		}
		// OperatorToken does not replace a damaged file either.
		if _, err2 := OperatorToken(home); !complete && err2 == nil {
			t.Fatalf("prefix %d: OperatorToken accepted it", n)
		}
	}
	if _, err := ReadOperatorToken(filepath.Join(home, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing home: %v", err)
	}
}
