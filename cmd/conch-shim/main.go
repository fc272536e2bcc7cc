// Command conch-shim is the small program conch starts under every
// command: a session's supervisor (`conch-shim supervise`) and a
// sandbox's init (`conch-shim sandbox-init`). It holds nothing else, so
// it starts in a few milliseconds; conch finds it beside its own
// executable or on PATH (`go install ./cmd/...` installs both) and
// checks its protocol at the handshake. Its dependency closure is the
// committed list deps.txt beside this file.
package main

import (
	"fmt"
	"os"

	"github.com/conchsh/conch/internal/session/shim"
	"github.com/conchsh/conch/internal/session/shim/entry"
)

func main() {
	code, ok := entry.Main(os.Args[1:])
	if !ok {
		fmt.Fprintf(os.Stderr, "usage: %s supervise|sandbox-init|handshake ... (internal; started by conch, protocol %s)\n", shim.Name, shim.Protocol())
		code = 2
	}
	os.Exit(code)
}
