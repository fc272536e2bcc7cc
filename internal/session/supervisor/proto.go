package supervisor

import "github.com/conchsh/conch/internal/session/supervisor/proto"

// ready is the first line the supervisor writes on fd 4.
type ready struct {
	OK    bool   `json:"ok"`
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
	// Socket is where the session is served (its shared supervisor's socket in a
	// shared supervisor); requests there name the session.
	Socket string `json:"socket,omitempty"`
	// Warnings are sandbox limits that could not be enforced.
	Warnings []string `json:"warnings,omitempty"`
	// Meta is what meta.json says, so the engine need not read it.
	Meta *proto.Meta `json:"meta,omitempty"`
	// NoSpace marks an Error caused by a full disk (ENOSPC, EDQUOT).
	NoSpace bool `json:"noSpace,omitempty"`
	// Code classifies Error (readyCodes); the engine's errors.Is sees
	// the matching sentinel, never the text.
	Code string `json:"code,omitempty"`
}
