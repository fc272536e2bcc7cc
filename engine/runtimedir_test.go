package engine

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRuntimeDir: where sockets go whose path in the home is too long.
// Linux uses $XDG_RUNTIME_DIR, else $TMPDIR, else /tmp; macOS always the
// per-user $TMPDIR (an XDG_RUNTIME_DIR there is ignored), else /tmp. On
// macOS the longest socket path (a 25-character session id, the longest
// the slug package makes) in the usual /var/folders/…/T/ directory fits
// in a sockaddr_un, whose path holds 103 bytes there.
func TestRuntimeDir(t *testing.T) {
	const macTmp = "/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/"
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		goos string
		env  func(string) string
		want string
	}{
		{"linux", env("XDG_RUNTIME_DIR", "/run/user/1000", "TMPDIR", "/scratch"), "/run/user/1000/conch-1a2b3c4d/s"},
		{"linux", env("TMPDIR", "/scratch"), "/scratch/conch-1000-1a2b3c4d/s"},
		{"linux", env(), "/tmp/conch-1000-1a2b3c4d/s"},
		{"darwin", env("TMPDIR", macTmp), "/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/conch-1000-1a2b3c4d/s"},
		{"darwin", env("XDG_RUNTIME_DIR", "/run/user/1000", "TMPDIR", macTmp), "/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/conch-1000-1a2b3c4d/s"},
		{"darwin", env(), "/tmp/conch-1000-1a2b3c4d/s"},
	} {
		if got := runtimeDir(c.goos, c.env, 1000, "1a2b3c4d"); got != c.want {
			t.Errorf("%s: %s, want %s", c.goos, got, c.want)
		}
	}
	sock := filepath.Join(runtimeDir("darwin", env("TMPDIR", macTmp), 501, shortHash("/Users/me/.conch")), strings.Repeat("x", 25)+".sock")
	if len(sock) > 103 {
		t.Errorf("%s: %d bytes, more than a macOS sockaddr_un holds", sock, len(sock))
	}
}
