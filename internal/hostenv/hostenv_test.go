package hostenv

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"FOO": "1"}, ""},
		{map[string]string{"path": "/x"}, "Security Violation: Custom 'PATH' variable is forbidden during host execution."},
		{map[string]string{"LD_PRELOAD": "x"}, "Security Violation: Environment variable 'LD_PRELOAD' is forbidden during host execution."},
		{map[string]string{"bash_func_x%%": "x", "HOME": "/"}, "Security Violation: invalid non-portable override keys: bash_func_x%%."},
		{map[string]string{"HOME": "/", "git_config_x": "1"}, "Security Violation: Environment variables 'HOME', 'git_config_x' are forbidden during host execution."},
	}
	for _, c := range cases {
		if got := Validate(c.env); got != c.want {
			t.Errorf("Validate(%v) = %q, want %q", c.env, got, c.want)
		}
	}
}

func TestInherit(t *testing.T) {
	got := strings.Join(Inherit([]string{"PATH=/bin", "LD_PRELOAD=x", "CONCH_TOKEN=secret", "NODE_OPTIONS=--x", "HOME=/root", "dyld_x=1"}), " ")
	if got != "PATH=/bin HOME=/root" {
		t.Fatalf("Inherit = %q", got)
	}
}

func TestMergePATH(t *testing.T) {
	if got := MergePATH("/a:/b", "/b:/c::/a"); got != "/a:/b:/c" {
		t.Fatalf("MergePATH = %q", got)
	}
}

func TestLoginPATH(t *testing.T) {
	p, _, err := StartLoginProbe("").Wait(-1)
	if err != nil {
		t.Skipf("no login shell here: %v", err)
	}
	if !strings.Contains(p, "/usr/bin") {
		t.Fatalf("login PATH %q lacks /usr/bin", p)
	}
}
