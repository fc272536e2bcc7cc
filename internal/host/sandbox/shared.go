package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RealBelow fails when a component of the workspace-relative path p is
// a symbolic link or missing.
func RealBelow(workspace, p string) error {
	cur := workspace
	for _, part := range strings.Split(filepath.Clean(p), "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return fmt.Errorf("the sandbox would mount %s read-only, but: %w", filepath.Join(workspace, p), err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link below the workspace on the way to %s, which the sandbox mounts read-only (the mount would follow it); remove it on the host", cur, filepath.Join(workspace, p))
		}
	}
	return nil
}

// SplitBind splits a configured bind "src[:dst]" into its source and
// destination (the source when none is given).
func SplitBind(b string) (string, string) {
	src, dst, ok := strings.Cut(b, ":")
	if !ok {
		dst = src
	}
	return src, dst
}

// Staged reports whether a run of settings s maps its command to another
// uid: the gateway is root and sandbox.runAs is not 0:0.
func Staged(uid, gid int) bool {
	return os.Geteuid() == 0 && (uid != 0 || gid != 0)
}

// InitFail reports msg as `conch sandbox-init` failing and returns its
// exit status (125), for the in-sandbox steps of every backend.
func InitFail(msg string) int {
	fmt.Fprintln(os.Stderr, "conch sandbox-init: "+msg)
	return 125
}
