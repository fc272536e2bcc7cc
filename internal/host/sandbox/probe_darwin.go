package sandbox

import (
	"os"
	"path/filepath"
)

// On macOS a sandbox (Seatbelt) has no namespaces of its own: it sees the
// host's network and file system, so the host's view is the sandbox's and
// wait probes need no process inside.

// InnerPID returns 0: no sandboxed process has namespaces of its own.
func InnerPID(pids []int) int { return 0 }

// ProbeFile reports whether path (relative paths against cwd) exists.
func ProbeFile(pid int, cwd, path string) bool {
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	_, err := os.Lstat(path)
	return err == nil
}

// ProbeNet runs a port or http probe from here.
func ProbeNet(pid int, kind, arg string) bool { return ProbeDirect(kind, arg) }
