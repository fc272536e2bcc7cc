package engine

import (
	"fmt"
	"path/filepath"
)

// runtimeDir is the per-user directory for the sockets of the home
// tagged tag whose path in the home would be too long for a sockaddr_un.
// On Linux: $XDG_RUNTIME_DIR/conch-<tag>/s, else under the temporary
// directory. On macOS XDG_RUNTIME_DIR is nobody's (launchd never sets
// it): always under $TMPDIR, which is per user there
// (/var/folders/…/T/). The temporary directory is $TMPDIR, else /tmp;
// its entry is conch-<uid>-<tag>/s, the uid because /tmp is shared.
// Not yet run on macOS: whether the system's cleaning of old files in
// /var/folders reaches a long-lived supervisor's socket.
func runtimeDir(goos string, getenv func(string) string, uid int, tag string) string {
	if base := getenv("XDG_RUNTIME_DIR"); base != "" && goos != "darwin" {
		return filepath.Join(base, "conch-"+tag, "s")
	}
	tmp := getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, fmt.Sprintf("conch-%d-%s", uid, tag), "s")
}
