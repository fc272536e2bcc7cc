package shellenv

import (
	"strings"
	"testing"
)

// TestPathValuesRefused generates the values of TZ and the locale
// variables that make the C library open a file the agent names: an
// absolute path, a ".." component anywhere, in any ":"-separated element
// (LANGUAGE is a list; TZ may start with ":"). Each is refused in a
// request and the harmless values pass.
func TestPathValuesRefused(t *testing.T) {
	keys := []string{"TZ", "tz", "LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LC_CTYPE", "LC_TIME", "LC_COLLATE", "lc_all"}
	targets := []string{"/tmp/x", "/etc/shadow", "../../../../tmp/x", "..", "x/../../y", "fr/..", `..\x`, `\\srv\share`}
	for _, k := range keys {
		for _, tgt := range targets {
			for _, v := range []string{tgt, ":" + tgt, "fr:" + tgt, tgt + ":en"} {
				msg := Validate(map[string]string{k: v})
				if !strings.HasPrefix(msg, "Security Violation: Environment variable '"+k+"' names a file path") {
					t.Errorf("%s=%q: %q", k, v, msg)
				}
			}
		}
		for _, v := range []string{"UTC", "Europe/Paris", ":Europe/Paris", "EST5EDT", "C.UTF-8", "fr_FR.UTF-8", "fr:en", "", "en_US.UTF-8@euro", "x..y"} {
			if msg := Validate(map[string]string{k: v}); msg != "" {
				t.Errorf("%s=%q refused: %s", k, v, msg)
			}
		}
	}
	// Other variables keep their path values; inherited values are the
	// operator's and are kept.
	if msg := Validate(map[string]string{"OUTDIR": "/tmp/x", "FOO": "../x"}); msg != "" {
		t.Errorf("OUTDIR, FOO: %s", msg)
	}
	if got := Inherit([]string{"TZ=:/etc/localtime"}); len(got) != 1 {
		t.Errorf("inherited TZ dropped: %q", got)
	}
}

// TestStartupAndLoaderKeys: variables that make the shell run the user's
// rc files (bash sources ~/.bashrc for -c when SSH_CLIENT or SSH2_CLIENT
// is set and SHLVL < 2) or the C library load data from a directory the
// agent names (LOCPATH, NLSPATH, TZDIR), or give a profiled tool options
// the gate never judged (GREP_OPTIONS: grep before 3.6 prepends it to its
// arguments, so GREP_OPTIONS=-r read files) are neither inherited nor
// accepted.
func TestStartupAndLoaderKeys(t *testing.T) {
	for _, k := range []string{"SSH_CLIENT", "SSH2_CLIENT", "LOCPATH", "NLSPATH", "TZDIR", "GREP_OPTIONS", "ssh_client"} {
		if msg := Validate(map[string]string{k: "x"}); !strings.Contains(msg, "'"+k+"' is forbidden") {
			t.Errorf("%s: %q", k, msg)
		}
		if got := Inherit([]string{k + "=x"}); len(got) != 0 {
			t.Errorf("%s inherited", k)
		}
	}
}
