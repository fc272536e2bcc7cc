package shellenv

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

// TestInterpreterAndEditorKeys: variables that make an allowlisted
// interpreter or git run code the command line does not name
// (PYTHONINSPECT reads a program from the terminal after the script,
// PYTHONUSERBASE runs .pth files, PYTHONWARNINGS imports a module, PERLLIB
// is PERL5LIB's older name, GIT_EDITOR is run by `git commit`), or write a
// file the agent names, are refused in a request and kept when inherited
// (the operator's own environment).
func TestInterpreterAndEditorKeys(t *testing.T) {
	keys := []string{"GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_CONFIG", "PYTHONINSPECT", "PYTHONWARNINGS", "PYTHONUSERBASE",
		"PYTHONPYCACHEPREFIX", "PYTHONBREAKPOINT", "PYTHONPLATLIBDIR", "PYTHONEXECUTABLE", "PYTHON_HISTORY", "PYTHON_PRESITE",
		"PERLLIB", "PERLIO_DEBUG", "RUBYPATH", "NODE_REPL_EXTERNAL_MODULE", "NODE_REPL_HISTORY", "NODE_REDIRECT_WARNINGS",
		"NODE_V8_COVERAGE", "git_editor", "PythonInspect", "TMPDIR", "TMP", "TEMP", "TEMPDIR", "tmpdir"}
	for _, k := range keys {
		if msg := Validate(map[string]string{k: "1"}); !strings.Contains(msg, "'"+k+"' is forbidden") {
			t.Errorf("%s: %q", k, msg)
		}
		if got := Inherit([]string{k + "=1"}); len(got) != 1 {
			t.Errorf("inherited %s dropped", k)
		}
	}
	// GIT_TRACE* write to the file their value names when it is absolute.
	for _, k := range []string{"GIT_TRACE", "GIT_TRACE2", "GIT_TRACE2_EVENT", "GIT_TRACE_PACKET", "GIT_TRACE_PERFORMANCE", "git_trace_setup"} {
		for _, v := range []string{"/tmp/x", "../../x"} {
			if msg := Validate(map[string]string{k: v}); !strings.Contains(msg, "names a file path") {
				t.Errorf("%s=%s: %q", k, v, msg)
			}
		}
		for _, v := range []string{"1", "true", "2", "0"} {
			if msg := Validate(map[string]string{k: v}); msg != "" {
				t.Errorf("%s=%s refused: %q", k, v, msg)
			}
		}
	}
	for _, k := range []string{"PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE", "GIT_AUTHOR_NAME", "NODE_ENV"} {
		if msg := Validate(map[string]string{k: "1"}); msg != "" {
			t.Errorf("%s refused: %q", k, msg)
		}
	}
}
