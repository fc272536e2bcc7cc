package sandbox

import (
	"os"
	"path/filepath"
)

// On Windows no session has namespaces of its own (the bwrap backend,
// whose sessions do, is Linux only): the host's view is the one wait
// probes have, and they need no process inside. Not yet run on Windows.

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
