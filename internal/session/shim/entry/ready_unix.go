//go:build unix

package entry

import "golang.org/x/sys/unix"

// reportReady writes line on the engine's ready pipe, fd 4, when it is
// there (a pipe).
func reportReady(line []byte) {
	var st unix.Stat_t
	if unix.Fstat(4, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
		unix.Write(4, line)
	}
}
