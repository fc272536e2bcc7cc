package engine

import "testing"

// TestDeriveNameKeepsFlags: a session's name keeps the flags and their
// values, so it says what runs.
func TestDeriveNameKeepsFlags(t *testing.T) {
	for cmd, want := range map[string]string{
		"vim -u NONE -N notes.txt": "vim -u NONE -N notes.txt",
		"ls -la":                   "ls -la",
		"echo hello":               "echo hello",
		"npm run build":            "npm run build",
		`grep -r "a b"  src`:       "grep -r a b src",
		"top":                      "top",
	} {
		if got := deriveName(cmd); got != want {
			t.Errorf("deriveName(%q) = %q, want %q", cmd, got, want)
		}
	}
	long := "cmd"
	for i := 0; i < 40; i++ {
		long += " --flag"
	}
	if n := len([]rune(deriveName(long))); n > nameMax || n < nameMax-1 {
		t.Errorf("a long command's name has %d code points, want at most %d", n, nameMax)
	}
}
