package shellenv

import "testing"

// TestLoginRegistryPATH: the logon PATH from the two registry values.
func TestLoginRegistryPATH(t *testing.T) {
	for _, c := range []struct{ machine, user, want string }{
		{"", "", ""},
		{`C:\Windows\system32;C:\Windows;`, "", `C:\Windows\system32;C:\Windows`},
		{`C:\Windows`, `C:\Users\a\bin;;`, `C:\Windows;C:\Users\a\bin`},
		{"", `C:\Users\a\bin`, `C:\Users\a\bin`},
		{`C:\x; ;C:\y`, `C:\x`, `C:\x;C:\y;C:\x`},
	} {
		if got := loginRegistryPATH(c.machine, c.user); got != c.want {
			t.Errorf("loginRegistryPATH(%q, %q) = %q, want %q", c.machine, c.user, got, c.want)
		}
	}
}
