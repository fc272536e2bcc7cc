package proto

import (
	"github.com/conchsh/conch/internal/term/keys"
	"github.com/conchsh/conch/internal/term/vt"
)

// Request is one line a client sends on the control socket. Its numbers
// carry apitype range tags: a node host checks a request forwarded from
// its gateway against them (apitype.CheckRanges).
type Request struct {
	V  int    `json:"v" range:"0,1000000,int"`
	Op string `json:"op"` // hello status meta subscribe write closeStdin signal kill resize screen trim flush
	// Session names the session on a shared supervisor's socket, which
	// serves many; a single supervisor takes "" or its own id.
	Session string `json:"session,omitempty"`

	Data    []byte `json:"data,omitempty"`                                  // write
	Sig     int    `json:"sig,omitempty" range:"0,64,int"`                  // signal
	By      string `json:"by,omitempty"`                                    // kill: a KilledBy (killedby.go)
	GraceMs *int64 `json:"graceMs,omitempty" range:"0,3600000,int,unit=ms"` // kill
	Cols    int    `json:"cols,omitempty" range:"0,65535,int"`              // resize
	Rows    int    `json:"rows,omitempty" range:"0,65535,int"`
	// MaxBytes is op trim's new journal cap (journal.Writer.Trim).
	MaxBytes int64 `json:"maxBytes,omitempty" range:"0,9007199254740992,int,unit=bytes"`
}

// Reply answers one Request.
type Reply struct {
	OK     bool    `json:"ok"`
	Error  string  `json:"error,omitempty"`
	PID    int     `json:"pid,omitempty"`
	Status *Status `json:"status,omitempty"`
	// Screen answers op screen: the PTY's screen after all output so far.
	Screen *vt.Snapshot `json:"screen,omitempty"`
	// Cursor is the journal end whose output Screen shows (at least).
	Cursor int64 `json:"cursor,omitempty"`
	// Bytes answers op trim: the journal's bytes on disk after it.
	Bytes int64 `json:"bytes,omitempty"`
	// Meta answers op meta: the session's meta.json as kept in memory
	// (also while a full disk keeps it from being written, or for an
	// engine that found the file damaged).
	Meta *Meta `json:"meta,omitempty"`
}

// Status is a running session's live state.
type Status struct {
	PID      int        `json:"pid"`
	Cursor   int64      `json:"cursor"`
	Stdin    string     `json:"stdin"` // open | closed | pty
	Modes    keys.Modes `json:"modes"`
	Ending   bool       `json:"ending"` // the main process exited or a kill is under way
	KilledBy string     `json:"killedBy,omitempty"`
	// LastOutputNs is the time of the newest output (unix ns), 0 if none.
	LastOutputNs int64 `json:"lastOutputNs,omitempty"`
	// JournalError is set while output cannot be journaled (a full disk):
	// the supervisor holds the output back and the command blocks on it.
	JournalError string `json:"journalError,omitempty"`
}

// Event is pushed to subscribers (and on the spawn pipe): a new end cursor
// of the journal, or the final end state.
type Event struct {
	Cursor int64 `json:"cursor"`
	Exit   *Exit `json:"exit,omitempty"`
}
