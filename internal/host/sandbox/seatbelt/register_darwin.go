package seatbelt

import (
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

// Registered on macOS only: sandbox-exec exists nowhere else. Not yet
// run on macOS.
func init() {
	sandbox.Register("seatbelt", sandbox.Factory{New: func(config.SandboxSettings) sandbox.Backend { return &Seatbelt{} }})
}
