package backends

import (
	_ "github.com/conchsh/conch/internal/host/sandbox/seatbelt" // Seatbelt (sandbox-exec)
)
