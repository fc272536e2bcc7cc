package shellenv

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestWithFloor: every PATH gets each floor entry it lacks, after its
// own entries, whose order is kept; a PATH that has them all is
// unchanged; the floors are each OS's usual system directories.
func TestWithFloor(t *testing.T) {
	if got := strings.Join(PathFloor("darwin"), ":"); got != "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin" {
		t.Fatalf("darwin floor %q", got)
	}
	if got := strings.Join(PathFloor("linux"), ":"); got != "/usr/local/bin:/usr/bin:/bin" {
		t.Fatalf("linux floor %q", got)
	}
	for _, tc := range []struct{ goos, in, want string }{
		{"linux", "/usr/bin:/bin", "/usr/bin:/bin:/usr/local/bin"},
		{"linux", "", "/usr/local/bin:/usr/bin:/bin"},
		{"linux", "/bin:/usr/bin:/usr/local/bin", "/bin:/usr/bin:/usr/local/bin"},
		{"linux", "/home/u/bin", "/home/u/bin:/usr/local/bin:/usr/bin:/bin"},
		{"darwin", "/usr/bin:/bin:/usr/sbin:/sbin", "/usr/bin:/bin:/usr/sbin:/sbin:/opt/homebrew/bin:/usr/local/bin"},
		{"darwin", "", "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin"},
		{"windows", `C:\Windows\system32`, `C:\Windows\system32`},
		{"windows", "", ""},
	} {
		if got := WithFloor(tc.goos, tc.in); got != tc.want {
			t.Errorf("WithFloor(%s, %q) = %q, want %q", tc.goos, tc.in, got, tc.want)
		}
	}
	// Generated: for every subset of the floor already present (in any
	// order), the result holds each floor entry exactly once, and starts
	// with the input.
	for _, goos := range []string{"linux", "darwin"} {
		floor := PathFloor(goos)
		for mask := 0; mask < 1<<len(floor); mask++ {
			var in []string
			for i := len(floor) - 1; i >= 0; i-- {
				if mask&(1<<i) != 0 {
					in = append(in, floor[i])
				}
			}
			in = append(in, "/opt/x")
			got := WithFloor(goos, strings.Join(in, ":"))
			if !strings.HasPrefix(got, strings.Join(in, ":")) {
				t.Errorf("%s %v: %q reorders the input", goos, in, got)
			}
			parts := strings.Split(got, ":")
			for _, f := range floor {
				if n := countOf(parts, f); n != 1 {
					t.Errorf("%s %v: %q has %s %d times", goos, in, got, f, n)
				}
			}
		}
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, e := range list {
		if e == s {
			n++
		}
	}
	return n
}

// TestNodeOverridesMacOS: a macOS node discards PATH in any letter case
// and keeps the rest; other nodes get the overrides unchanged (and
// Validate refuses the PATH there). The caller's map is never changed.
func TestNodeOverridesMacOS(t *testing.T) {
	for _, key := range []string{"PATH", "Path", "path"} {
		in := map[string]string{key: "/evil:/usr/bin", "FOO": "1"}
		orig := maps.Clone(in)
		out, dropped := NodeOverrides("darwin", in)
		if !dropped || len(out) != 1 || out["FOO"] != "1" {
			t.Errorf("darwin %s: %v dropped=%v", key, out, dropped)
		}
		if !maps.Equal(in, orig) {
			t.Errorf("darwin %s: the caller's map changed", key)
		}
		out, dropped = NodeOverrides("linux", in)
		if dropped || !maps.Equal(out, in) {
			t.Errorf("linux %s: %v dropped=%v", key, out, dropped)
		}
		if msg := Validate(out); !strings.Contains(msg, "PATH") {
			t.Errorf("linux %s: Validate let it through: %q", key, msg)
		}
	}
	out, dropped := NodeOverrides("darwin", map[string]string{"FOO": "1"})
	if dropped || !slices.Equal(slices.Sorted(maps.Keys(out)), []string{"FOO"}) {
		t.Errorf("darwin without PATH: %v dropped=%v", out, dropped)
	}
}

// TestLoaderPrefixesBlocked: the dynamic loaders' variables are refused
// and never inherited on every OS: LD_* (glibc, musl) and DYLD_* (macOS
// dyld), in any letter case.
func TestLoaderPrefixesBlocked(t *testing.T) {
	for _, k := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES",
		"DYLD_LIBRARY_PATH", "DYLD_FRAMEWORK_PATH", "DYLD_FALLBACK_LIBRARY_PATH", "dyld_insert_libraries", "Ld_Preload"} {
		if !Dangerous(k) || !Blocked(k) {
			t.Errorf("%s is not blocked", k)
		}
		if got := Inherit([]string{k + "=/tmp/x.dylib", "KEEP=1"}); !slices.Equal(got, []string{"KEEP=1"}) {
			t.Errorf("%s inherited: %v", k, got)
		}
		if msg := Validate(map[string]string{k: "/tmp/x"}); !strings.Contains(msg, "forbidden") {
			t.Errorf("%s accepted: %q", k, msg)
		}
	}
}
