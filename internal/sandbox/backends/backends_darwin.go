package backends

import (
	_ "github.com/conchsh/conch/internal/sandbox/seatbelt" // Seatbelt (sandbox-exec)
)
