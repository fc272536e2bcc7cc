package backends

import (
	_ "github.com/conchsh/conch/internal/host/sandbox/bwrap"    // bubblewrap
	_ "github.com/conchsh/conch/internal/host/sandbox/landlock" // Landlock + seccomp
)
