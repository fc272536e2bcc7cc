package patch

import "testing"

// TestPathRules: volumes, roots and containment of Unix and Windows
// paths, whatever system the test runs on.
func TestPathRules(t *testing.T) {
	vols := []struct {
		r    pathRules
		p    string
		want string
	}{
		{unixRules, "/a/b", ""},
		{unixRules, "C:/a", ""},
		{windowsRules, `C:\a\b`, "C:"},
		{windowsRules, `c:`, "c:"},
		{windowsRules, `\\srv\share\x\y`, `\\srv\share`},
		{windowsRules, `//srv/share/x`, `//srv/share`},
		{windowsRules, `\\srv\share`, `\\srv\share`},
		{windowsRules, `\\srv`, ""},
		{windowsRules, `\a\b`, ""},
		{windowsRules, `1:\a`, ""},
	}
	for _, v := range vols {
		if got := v.r.volume(v.p); got != v.want {
			t.Errorf("%+v volume(%q) = %q, want %q", v.r, v.p, got, v.want)
		}
	}
	for _, c := range []struct {
		r    pathRules
		p    string
		want string
	}{{unixRules, "/etc/x", "/"}, {windowsRules, `C:\ws\x`, `C:\`}, {windowsRules, `\\srv\share\x`, `\\srv\share\`}} {
		if got := c.r.root(c.p); got != c.want {
			t.Errorf("root(%q) = %q, want %q", c.p, got, c.want)
		}
	}
	ins := []struct {
		r       pathRules
		root, p string
		want    bool
	}{
		{unixRules, "/ws", "/ws", true},
		{unixRules, "/ws", "/ws/a", true},
		{unixRules, "/ws", "/wsx/a", false},
		{unixRules, "/ws", "/WS/a", false},
		{unixRules, "/", "/anything", true},
		{unixRules, "/ws", `/ws\a`, false},
		{windowsRules, `C:\ws`, `C:\ws\a\b.go`, true},
		{windowsRules, `C:\ws`, `c:\WS\a`, true},
		{windowsRules, `C:\ws`, `C:\wsx\a`, false},
		{windowsRules, `C:\ws`, `D:\ws\a`, false},
		{windowsRules, `C:\ws`, `C:/ws/a`, false}, // clean paths use `\`
		{windowsRules, `C:\`, `C:\x`, true},
		{windowsRules, `C:\`, `D:\x`, false},
		{windowsRules, `\\srv\share\ws`, `\\srv\share\ws\a`, true},
		{windowsRules, `\\srv\share\ws`, `\\srv\other\ws\a`, false},
	}
	for _, c := range ins {
		if got := c.r.within(c.root, c.p); got != c.want {
			t.Errorf("%+v within(%q, %q) = %v, want %v", c.r, c.root, c.p, got, c.want)
		}
	}
	if !windowsRules.same(`C:\WS`, `c:\ws`) || unixRules.same("/WS", "/ws") {
		t.Error("same folds case on Windows only")
	}
}
