package backends

import (
	_ "github.com/conchsh/conch/internal/sandbox/bwrap"    // bubblewrap
	_ "github.com/conchsh/conch/internal/sandbox/landlock" // Landlock + seccomp
)
