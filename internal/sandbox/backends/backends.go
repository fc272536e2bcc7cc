// Package backends is the one list of the sandbox backends this program
// has: importing it registers each with internal/sandbox, so that
// sandbox.For and sandbox.New know them. A new backend is a subpackage
// of internal/sandbox that calls sandbox.Register from its init
// function, plus one line here.
package backends

import (
	_ "github.com/conchsh/conch/internal/sandbox/bwrap"    // bubblewrap
	_ "github.com/conchsh/conch/internal/sandbox/docker"   // docker
	_ "github.com/conchsh/conch/internal/sandbox/landlock" // Landlock + seccomp
)
