package host

import "testing"

// TestJoinWindowsWorkdir: every form of a Windows path as a workdir,
// against a workspace on C:.
func TestJoinWindowsWorkdir(t *testing.T) {
	const def = `C:\Users\me\ws`
	for _, c := range []struct{ w, want string }{
		{`src`, `C:\Users\me\ws\src`},
		{`src\pkg`, `C:\Users\me\ws\src\pkg`},
		{`src/pkg`, `C:\Users\me\ws\src/pkg`},
		{`..\other`, `C:\Users\me\ws\..\other`},
		{`C:\tmp`, `C:\tmp`},
		{`c:/tmp`, `c:/tmp`},
		{`D:\data`, `D:\data`},
		{`\tmp`, `C:\tmp`},
		{`/tmp`, `C:/tmp`},
		{`C:sub`, `C:\Users\me\ws\sub`},
		{`c:sub`, `C:\Users\me\ws\sub`},
		{`D:sub`, `D:\sub`},
		{`D:`, `D:\`},
		{`\\srv\share\x`, `\\srv\share\x`},
		{`//srv/share/x`, `//srv/share/x`},
	} {
		if got := joinWindowsWorkdir(def, c.w); got != c.want {
			t.Errorf("joinWindowsWorkdir(%q, %q) = %q, want %q", def, c.w, got, c.want)
		}
	}
	if got := joinWindowsWorkdir(`\\srv\share\ws\`, `a`); got != `\\srv\share\ws\a` {
		t.Errorf("under a share: %q", got)
	}
}
