//go:build unix

package backends

import (
	_ "github.com/conchsh/conch/internal/host/sandbox/docker" // docker
)
