package engine

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/term/keys"
)

// runningText is the text of a `running` exec result: the session, the
// process actions that apply to a session of its kind (stdin is "pty",
// "open" or "closed") and the output so far.
func runningText(id string, pid int, stdin, tail string, screen bool) string {
	text := fmt.Sprintf("Command still running (session %s, pid %d). %s", id, pid, nextActions(stdin))
	if tail == "" {
		return text
	}
	if screen {
		return text + "\n\nScreen so far:\n" + tail
	}
	return text + fmt.Sprintf("\n\nOutput so far (last %d chars):\n%s", utf8.RuneCountInString(tail), tail)
}

// nextActions says what the model can do next with a running session
// whose stdin is stdin: a terminal takes keys, lines and pastes and has a
// screen; a pipe takes writes; a closed stdin takes no input.
func nextActions(stdin string) string {
	switch stdin {
	case "pty":
		return "Use process (list/poll/log/wait/screen/send-keys/submit/paste/kill/clear/remove) for follow-up: " +
			"screen shows the terminal, send-keys sends keys (Enter, C-c, Up), submit sends a line and Enter, paste sends text."
	case "closed":
		return "Use process (list/poll/log/wait/kill/clear/remove) for follow-up; its stdin is closed (start with background:true or pty:true to send input)."
	}
	return "Use process (list/poll/log/wait/write/kill/clear/remove) for follow-up."
}

// viewTail is the output a model is shown of a session so far (the
// running result of exec, wait's tail, list): the terminal's screen for a
// PTY session drawing a full screen (screen reports which), else the
// newest complete lines of the rendered output within n characters, so
// a tail never starts in the middle of a row.
func (e *Engine) viewTail(s *session, n int) (text string, cursor int64, screen bool) {
	if text, end, ok := e.screenTail(s); ok {
		return text, end, true
	}
	text, cursor = e.tail(s, n)
	return rowAligned(text, n), cursor, false
}

// rowAligned drops the first line of a tail cut to n characters when it
// may have been cut (the tail is n characters long) and a later line
// exists; a single line longer than n is kept as cut.
func rowAligned(tail string, n int) string {
	if utf8.RuneCountInString(tail) < n {
		return tail
	}
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		return tail[i+1:]
	}
	return tail
}

// screenTail returns the screen view of a PTY session that draws a full
// screen, judged from the newest output (the part an emulator replays):
// a session once seen drawing one stays a screen session while it runs.
func (e *Engine) screenTail(s *session) (string, int64, bool) {
	s.mu.Lock()
	meta, socket, draws := s.meta, s.socket, s.drawsScreen
	s.mu.Unlock()
	if !meta.PTY && meta.Stdin != "pty" {
		return "", 0, false
	}
	running := s.running()
	if !draws || !running {
		score := 0
		sc := keys.Scanner{Handle: func(q keys.Seq) { score += screenDrawing(q) }}
		journal.ReadTail(s.journal(), screenScanBytes, func(c journal.Chunk) error {
			if score < screenThreshold {
				sc.Write(c.Data)
			}
			return nil
		})
		draws = score >= screenThreshold
		if !draws && !running {
			return "", 0, false
		}
	}
	snap, end, _, err := e.screenSnapshot(s, socket, meta.Cols, meta.Rows)
	if err != nil || !draws && !snap.AltScreen {
		return "", 0, false
	}
	if draws && running {
		s.mu.Lock()
		s.drawsScreen = true
		s.mu.Unlock()
	}
	return screenText(snap), end, true
}

// screenScanBytes is how much of the newest output screenTail scans for
// screen drawing.
const screenScanBytes = 64 << 10
