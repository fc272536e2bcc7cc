package engine

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/term/keys"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/term/vt"
)

// screenAction implements process screen.
func (e *Engine) screenAction(s *session, p apitype.ProcessParams) apitype.Result {
	s.mu.Lock()
	meta, socket := s.meta, s.socket
	s.mu.Unlock()
	// meta.PTY comes from the supervisor; Stdin "pty" covers a meta.json
	// that could not be read. (state.PTY stays set when the PTY spawn
	// fell back to pipes.)
	if !meta.PTY && meta.Stdin != "pty" {
		return processError(apitype.Errorf(apitype.CodeInvalidState, "Session %s has no terminal (not a PTY session).", s.id))
	}
	snap, cursor, approximate, err := e.screenSnapshot(s, socket, meta.Cols, meta.Rows)
	if err != nil {
		return processError(apitype.Errorf(apitype.CodeIOError, "read journal of %s: %v", s.id, err))
	}
	_, ex, _ := s.snapshot()
	return apitype.Result{Text: screenText(snap), Details: &apitype.ScreenDetails{
		Status: runStatus(ex), SessionID: s.id, Cols: snap.Cols, Rows: snap.Rows,
		CursorRow: snap.CursorRow, CursorCol: snap.CursorCol, CursorVisible: snap.CursorVisible,
		AltScreen: snap.AltScreen, Title: snap.Title, Lines: snap.Lines, Cursor: cursor, Approximate: approximate,
	}}
}

// screenSnapshot returns the screen of a PTY session: the live emulator's
// while the session runs, else one rebuilt from the journal.
func (e *Engine) screenSnapshot(s *session, socket string, cols, rows int) (snap vt.Snapshot, cursor int64, approximate bool, err error) {
	if s.running() {
		// A supervisor that is ending, gone or older than op screen
		// leaves the journal, which has all the output it saw.
		if rep, err := supervisor.Call(socket, proto.Request{Op: "screen", Session: s.id}); err == nil && rep.Screen != nil {
			return *rep.Screen, rep.Cursor, rep.Screen.SkippedBytes > 0, nil
		}
	}
	return replayScreen(s.journal(), cols, rows)
}

// screenDrawing scores a sequence of a PTY's output by how surely it is
// what a full-screen program writes and a line program does not: entering
// the alternate screen (DECSET 1049, 1047 or 47: ESC[?1049h) scores
// screenThreshold at once; cursor addressing to a row and column (CUP/HVP
// with both parameters, ESC[<r>;<c>H or f), to the home position with
// none (ESC[H: what top repaints from, off the alternate screen) or to a
// row (VPA, ESC[<r>d) scores 1. Everything else scores 0.
func screenDrawing(q keys.Seq) int {
	if !q.CSI || q.Intermediate != 0 || q.Sub {
		return 0
	}
	given := func(n int) bool {
		if len(q.Params) != n {
			return false
		}
		for _, v := range q.Params {
			if v < 0 {
				return false
			}
		}
		return true
	}
	switch {
	case q.Prefix == '?' && q.Final == 'h':
		for _, m := range q.Params {
			if m == 1049 || m == 1047 || m == 47 {
				return screenThreshold
			}
		}
	case q.Prefix == 0 && (q.Final == 'H' || q.Final == 'f') && (given(2) || len(q.Params) == 0),
		q.Prefix == 0 && q.Final == 'd' && given(1):
		return 1
	}
	return 0
}

// screenThreshold is how many screenDrawing matches make a read a screen
// view: one alternate-screen switch is enough, cursor addressing must be
// seen twice (a lone ESC[H from `clear` is not a full-screen program).
const screenThreshold = 2

// screenView decides whether a read from since of a PTY session is shown
// as the terminal's screen instead of lines: the output read draws a
// screen (screenDrawing), or the program is on the alternate screen now.
// It returns the text of the view (screenText) and the journal end.
func (e *Engine) screenView(s *session, since int64) (text string, end int64, ok bool) {
	s.mu.Lock()
	meta, socket, draws := s.meta, s.socket, s.drawsScreen
	s.mu.Unlock()
	if !meta.PTY && meta.Stdin != "pty" {
		return "", 0, false
	}
	score := 0
	if draws && s.running() {
		// Seen drawing a screen before: a read of its newest output
		// (one row updated) is still a screen.
		score = screenThreshold
	}
	sc := keys.Scanner{Handle: func(q keys.Seq) { score += screenDrawing(q) }}
	end, err := journal.Read(s.journal(), max(since, 0), func(c journal.Chunk) error {
		if score < screenThreshold {
			sc.Write(c.Data)
		}
		return nil
	})
	if err != nil || score < screenThreshold && !s.running() {
		return "", 0, false
	}
	snap, _, _, err := e.screenSnapshot(s, socket, meta.Cols, meta.Rows)
	if err != nil || score < screenThreshold && !snap.AltScreen {
		return "", 0, false
	}
	if score >= screenThreshold && s.running() {
		s.mu.Lock()
		s.drawsScreen = true
		s.mu.Unlock()
	}
	return screenText(snap), end, true
}

// screenText is the visible rows without trailing empty ones, then a
// footer with the size, the cursor and the active screen.
func screenText(snap vt.Snapshot) string {
	n := len(snap.Lines)
	for n > 0 && snap.Lines[n-1] == "" {
		n--
	}
	which := "main"
	if snap.AltScreen {
		which = "alternate"
	}
	footer := fmt.Sprintf("[screen %dx%d, cursor %d,%d, %s screen]", snap.Cols, snap.Rows, snap.CursorRow, snap.CursorCol, which)
	if n == 0 {
		return footer
	}
	return strings.Join(snap.Lines[:n], "\n") + "\n" + footer
}

// replayScreen rebuilds a terminal's screen from the end of a session's
// journal in a fresh emulator of cols × rows (0 = default). Only the last
// vt.MaxBacklog bytes are replayed (the emulator may skip more, see
// vt.Replay): enough for the screen of anything but a full-screen program
// that drew long ago and has sent little since.
func replayScreen(dir string, cols, rows int) (snap vt.Snapshot, cursor int64, approximate bool, err error) {
	info, err := journal.Stat(dir)
	if err != nil {
		return snap, 0, false, err
	}
	var out []byte
	start, end, err := journal.ReadTail(dir, vt.MaxBacklog, func(c journal.Chunk) error {
		out = append(out, c.Data...)
		return nil
	})
	if err != nil {
		return snap, 0, false, err
	}
	if start > 0 {
		// A replay from the middle may start inside an escape sequence:
		// begin at a line end when one is near.
		if i := bytes.IndexByte(out[:min(len(out), 4096)], '\n'); i >= 0 {
			out = out[i+1:]
		}
	}
	snap = vt.Replay(cols, rows, out)
	return snap, end, start > 0 || info.DroppedBytes > 0 || snap.SkippedBytes > 0, nil
}
