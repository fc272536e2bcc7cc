package policy

import "testing"

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		// the documented examples
		{"/opt/**/rg", "/opt/homebrew/bin/rg", true},
		{"/opt/*/rg", "/opt/homebrew/bin/rg", false},
		{"/usr/bin/*++", "/usr/bin/g++", true},
		{"RG", "/usr/bin/rg", false},
		{"rg", "/usr/bin/rg", false},
		{"python3", "/usr/bin/python3", false},
		{"*", "/usr/bin/anything", true},
		{" * ", "/x", true},
		{"*", "", false},
		{"~/Projects/**/bin/rg", "/home/u/Projects/x/bin/rg", true},
		{"~/Projects/**/bin/rg", "/home/u/Projects/a/b/c/bin/rg", true},
		{"~/Projects/**/bin/rg", "/home/v/Projects/x/bin/rg", false},
		{"~/bin/tool", "/home/u/bin/tool", true},
		{"~", "/home/u", true},
		{"~u/bin/tool", "/home/u/bin/tool", false},
		// case-sensitive on the full path (MatchGlobFold: see below)
		{"/USR/BIN/GIT", "/usr/bin/git", false},
		{"/usr/bin/git", "/USR/bin/Git", false},
		{"/x/bin/tool", "/x/BIN/TOOL", false},
		{"/usr/bin/git", "/usr/bin/git2", false},
		{"/usr/bin/git", "/usr/bin/gi", false},
		{"/usr/bin/git", "/x/usr/bin/git", false},
		// * does not cross /, ** does
		{"/usr/*", "/usr/bin/git", false},
		{"/usr/**", "/usr/bin/git", true},
		{"/usr/bin/*", "/usr/bin/git", true},
		{"/usr/bin/*", "/usr/bin/", true},
		{"/**/git", "/usr/bin/git", true},
		{"/**git", "/usr/bin/git", true},
		{"**", "/usr/bin/git", false}, // no "/" in the pattern: ignored
		{"/**", "/usr/bin/git", true},
		{"/usr/bin/g*t", "/usr/bin/git", true},
		{"/usr/bin/g*t", "/usr/bin/gt", true},
		{"/usr/bin/g*t", "/usr/bin/g/t", false},
		{"/usr/bin/*/*", "/usr/bin/a/b", true},
		{"/a/*b*c*d", "/a/xbxxcxxxd", true},
		{"/a/*b*c*d", "/a/xbxxcxxx", false},
		// ? is any one character
		{"/usr/bin/gi?", "/usr/bin/git", true},
		{"/usr/bin/gi?", "/usr/bin/gi", false},
		{"/usr/bin/gi?", "/usr/bin/gitt", false},
		{"/usr/bin?git", "/usr/bin/git", true},
		// everything else literal
		{"/usr/bin/[g]it", "/usr/bin/git", false},
		{"/usr/bin/[g]it", "/usr/bin/[g]it", true},
		{"/usr/bin/g.t", "/usr/bin/git", false},
		{"/usr/bin/(g)", "/usr/bin/(g)", true},
		{"/usr/bin/a+", "/usr/bin/aa", false},
		{"/usr/bin/{a,b}", "/usr/bin/a", false},
		// backslashes are slashes
		{`\usr\bin\git`, "/usr/bin/git", true},
		{`C:\tools\*`, "C:/tools/rg", true},
		// unicode
		{"/opt/ÄÖ/*", "/opt/äö/x", false},
		{"/opt/äö/*", "/opt/äö/x", true},
		{"/opt/ą?/x", "/opt/ąb/x", true},
		// empty
		{"", "/usr/bin/git", false},
		{"   ", "/usr/bin/git", false},
	}
	for _, tt := range tests {
		if got := MatchGlob(tt.pattern, tt.path, "/home/u"); got != tt.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
	if MatchGlob("~/bin/tool", "/bin/tool", "") {
		t.Error("~ with no home matched")
	}
	if !MatchGlob("~/bin/tool", "/home/u/bin/tool", "/home/u/") {
		t.Error("home with a trailing slash")
	}
}

// TestMatchGlobFold: on a host that folds case, case never matters.
func TestMatchGlobFold(t *testing.T) {
	for _, tt := range []struct {
		pattern, path string
		want          bool
	}{
		{"/USR/BIN/GIT", "/usr/bin/git", true},
		{"/usr/bin/git", "/USR/bin/Git", true},
		{"/x/bin/tool", "/x/BIN/TOOL", true},
		{"/opt/ÄÖ/*", "/opt/äö/x", true},
		{"/usr/bin/git", "/usr/bin/git2", false},
		{"RG", "/usr/bin/rg", false},
	} {
		if got := MatchGlobFold(tt.pattern, tt.path, "/home/u"); got != tt.want {
			t.Errorf("MatchGlobFold(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

func TestMatchGlobPathological(t *testing.T) {
	p := "/" + repeat("*a", 30) + "b"
	s := "/" + repeat("a", 200)
	if MatchGlob(p, s, "") {
		t.Error("matched")
	}
	p = "/" + repeat("**a", 30) + "b"
	if MatchGlob(p, s, "") {
		t.Error("matched")
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
