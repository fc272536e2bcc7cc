package supervisor

import "github.com/conchsh/conch/internal/journal"

// The read side of a session directory for readers outside the engine
// (a node host streaming a session to its gateway): they go through these
// and ReadExit rather than the directory's layout.

// ReadMeta reads the meta.json of the session in dir (errors as ReadJSON).
func ReadMeta(dir string) (Meta, error) {
	var m Meta
	err := ReadJSON(MetaPath(dir), &m)
	return m, err
}

// ReadOutput calls fn for the output of the session in dir from cursor
// since on (journal.Read) and returns the cursor where the journal ends.
func ReadOutput(dir string, since int64, fn func(journal.Chunk) error) (end int64, err error) {
	return journal.Read(JournalDir(dir), since, fn)
}
