package supervisor

import "github.com/conchsh/conch/internal/journal"

// ReadOutput calls fn for the output of the session in dir from cursor
// since on (journal.Read) and returns the cursor where the journal ends.
// It is the read side of a session's output for readers outside the
// engine (a node host streaming a session to its gateway), which go
// through it rather than the directory's layout.
func ReadOutput(dir string, since int64, fn func(journal.Chunk) error) (end int64, err error) {
	return journal.Read(JournalDir(dir), since, fn)
}
