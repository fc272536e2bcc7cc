//go:build unix

package hub

import (
	"path/filepath"
	"testing"

	"github.com/conchsh/conch/internal/base/unixsock/unixsocktest"
)

// TestMirrorSocketKeepsUmask: a mirror creating its control socket never
// changes the process umask, which commands forked meanwhile inherit, and
// the socket is 0600.
func TestMirrorSocketKeepsUmask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s", "node-session.sock")
	unixsocktest.CheckUmaskKept(t, func() (string, func(), error) {
		m := &mirror{}
		if err := m.listen(path); err != nil {
			return "", nil, err
		}
		return path, func() { m.ln.Close() }, nil
	})
}
