//go:build unix

package cli

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/conchsh/conch/internal/base/unixsock/unixsocktest"
)

// TestEngineSocketKeepsUmask: creating the engine socket never changes the
// process umask, which every command a supervisor forks meanwhile
// inherits, and the socket is 0600.
func TestEngineSocketKeepsUmask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "engine.sock")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	unixsocktest.CheckUmaskKept(t, func() (string, func(), error) {
		ln, err := listenEngineSocket(path, log)
		if err != nil {
			return "", nil, err
		}
		return path, func() { ln.Close() }, nil
	})
}
