package engine

import (
	"errors"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/conchsh/conch/internal/session/journal"
)

// maxFollowBytes bounds one FollowBytes chunk.
const maxFollowBytes = 256 << 10

var errFollowFull = errors.New("chunk full")

// FollowBytes reads agent's session id from since for a terminal view:
// the output bytes of all streams exactly as journaled (escapes, carriage
// returns and partial lines kept), at most 256 KiB per call. A trailing
// incomplete UTF-8 sequence is held back so that Text is always valid
// UTF-8; a dropped middle of the journal is skipped silently. Ended is set
// once the session has ended and everything was delivered.
func (e *Engine) FollowBytes(agent, id string, since int64) (Chunk, bool) {
	s := e.lookup(agent, id)
	if s == nil {
		return Chunk{}, false
	}
	st, ex, _ := s.snapshot()
	if st.Hidden {
		return Chunk{}, false
	}
	since = max(since, 0)
	var buf []byte
	next := since
	_, err := journal.Read(s.journal(), since, func(c journal.Chunk) error {
		room := maxFollowBytes - len(buf)
		d := c.Data
		if len(d) > room {
			d = d[:room]
		}
		buf = append(buf, d...)
		next = c.Cursor + int64(len(d))
		if len(buf) >= maxFollowBytes {
			return errFollowFull
		}
		return nil
	})
	full := errors.Is(err, errFollowFull)
	if err != nil && !full && !errors.Is(err, fs.ErrNotExist) {
		return Chunk{}, false
	}
	// Hold back an incomplete UTF-8 sequence at the end while more may
	// follow; at the end of an ended session it is delivered (as U+FFFD).
	cut := len(buf)
	for i := len(buf) - 1; (ex == nil || full) && i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	next -= int64(len(buf) - cut)
	c := Chunk{Text: strings.ToValidUTF8(string(buf[:cut]), "\uFFFD"), Next: next, State: "running", More: full}
	if ex != nil && !full {
		c.Ended, c.State, c.Exit, c.Signal, c.Killed = true, ex.State, ex.ExitCode, ex.Signal, ex.KilledBy
	}
	return c, true
}
