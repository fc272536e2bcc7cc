package sandbox

import "github.com/conchsh/conch/apitype"

// Container is one conch sandbox container (the wire type is apitype's:
// the containers of GET /v1/sandbox).
type Container = apitype.SandboxContainer
