package policy

import "testing"

// TestAllowMatchWindowsPaths: allowlist patterns written with "\" or "/"
// and any letter case match a Windows executable path (drive letter,
// "\" separators) when Env.WindowsPaths and FoldCase are set, and only
// then; "*" stays within one directory.
func TestAllowMatchWindowsPaths(t *testing.T) {
	const exe = `C:\Program Files\Git\bin\git.exe`
	cases := []struct {
		pattern string
		match   bool
	}{
		{`C:\Program Files\Git\bin\git.exe`, true},
		{`c:/program files/git/bin/GIT.EXE`, true},
		{`C:\Program Files\Git\bin\*.exe`, true},
		{`C:\Program Files\Git\*`, false},
		{`C:\Program Files\Git\**`, true},
		{`C:\Program Files\Git\bin\git.ex?`, true},
		{`D:\Program Files\Git\bin\git.exe`, false},
		{`C:\Program Files\Git\bin\git`, false},
		{`git.exe`, false},
		{`*`, true},
	}
	for _, c := range cases {
		for _, win := range []bool{true, false} {
			req := &Request{Allowlist: []AllowEntry{{Pattern: c.pattern}}, Env: Env{FoldCase: true, WindowsPaths: win}}
			got := newEvaluator(req).allowMatchPath(resolved{path: exe}) != nil
			want := c.match && (win || c.pattern == "*")
			if got != want {
				t.Errorf("pattern %q WindowsPaths=%v: match %v, want %v", c.pattern, win, got, want)
			}
		}
	}
}
