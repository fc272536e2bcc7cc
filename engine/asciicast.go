package engine

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"strconv"
	"unicode/utf8"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/term/vt"
)

// AsciicastHeader is the first line of an asciicast v2 recording.
type AsciicastHeader struct {
	Version   int    `json:"version"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
	Timestamp int64  `json:"timestamp,omitempty"`
	Command   string `json:"command,omitempty"`
	Title     string `json:"title,omitempty"`
}

// Asciicast writes agent's PTY session id to w as an asciicast v2
// recording (https://docs.asciinema.org/manual/asciicast/v2/): a header
// line with the terminal size, then one "o" event per journal record of
// output, timed by when the supervisor journaled it, relative to the
// session's start. Input is not recorded. A running session gives what
// it has written so far. A UTF-8 sequence split between two records is
// joined into the later event; bytes that are not UTF-8 become U+FFFD.
// A trimmed journal's dropped middle is skipped.
//
// The error is an *apitype.Error: not_found for an unknown session,
// invalid_state for a session without a terminal, io_error when the
// journal cannot be read (or w fails).
func (e *Engine) Asciicast(agent, id string, w io.Writer) error {
	s := e.lookup(agent, id)
	if s == nil {
		return apitype.Errorf(apitype.CodeNotFound, "No session found for %s.", id)
	}
	st, _, _ := s.snapshot()
	if st.Hidden {
		return apitype.Errorf(apitype.CodeNotFound, "No session found for %s.", id)
	}
	s.mu.Lock()
	meta := s.meta
	s.mu.Unlock()
	if !meta.PTY && meta.Stdin != "pty" {
		return apitype.Errorf(apitype.CodeInvalidState, "Session %s has no terminal (not a PTY session): use process log for its output.", id)
	}
	cols, rows := meta.Cols, meta.Rows
	if cols <= 0 || rows <= 0 {
		cols, rows = vt.DefaultCols, vt.DefaultRows
	}
	startNs := meta.StartedAt * 1e6
	if startNs == 0 {
		startNs = st.CreatedAt * 1e6
	}
	bw := bufio.NewWriter(w)
	hdr, _ := json.Marshal(AsciicastHeader{Version: 2, Width: cols, Height: rows, Timestamp: startNs / 1e9, Command: st.Command, Title: "conch session " + id})
	bw.Write(append(hdr, '\n'))
	var carry []byte
	var last float64
	event := func(t float64, data []byte) {
		b, _ := json.Marshal(string(data)) // invalid UTF-8 becomes U+FFFD
		bw.WriteString("[" + strconv.FormatFloat(t, 'f', 6, 64) + ", \"o\", ")
		bw.Write(b)
		bw.WriteString("]\n")
	}
	_, err := journal.Read(s.journal(), 0, func(c journal.Chunk) error {
		t := max(float64(c.TimeNs-startNs)/1e9, last)
		last = t
		data := append(carry, c.Data...)
		carry = nil
		// Hold back a UTF-8 sequence cut at the end of the record.
		for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
			if utf8.RuneStart(data[i]) {
				if !utf8.FullRune(data[i:]) {
					carry = append([]byte(nil), data[i:]...)
					data = data[:i]
				}
				break
			}
		}
		if len(data) > 0 {
			event(t, data)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return apitype.Errorf(apitype.CodeIOError, "read journal of %s: %v", id, err)
	}
	if len(carry) > 0 {
		event(last, carry)
	}
	if err := bw.Flush(); err != nil {
		return apitype.Errorf(apitype.CodeIOError, "write recording of %s: %v", id, err)
	}
	return nil
}
