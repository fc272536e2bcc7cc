package keys

import (
	"bytes"
	"sync/atomic"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// Modes are the terminal modes a program has enabled, as seen in its output.
// The zero value is a freshly reset terminal: both modes off.
type Modes struct {
	// AppCursor is application cursor keys mode (DECCKM): set by ESC[?1h, reset by ESC[?1l.
	AppCursor bool
	// BracketedPaste is bracketed-paste mode: set by ESC[?2004h, reset by ESC[?2004l.
	BracketedPaste bool
}

// Bits of Tracker.modes.
const (
	modeAppCursor uint32 = 1 << iota
	modeBracketedPaste
)

// decModes maps the DEC private mode numbers the Tracker follows to their bits.
var decModes = map[int]uint32{
	1:    modeAppCursor,
	2004: modeBracketedPaste,
}

// A Tracker follows the terminal modes a program enables, by scanning the bytes the program
// writes to its terminal with the ECMA-48 / DEC parser of github.com/charmbracelet/x/ansi. It
// recognises DECSET and DECRST (ESC[?…h, ESC[?…l) for modes 1 and 2004, alone or among other
// parameters (ESC[?1;2004h), and the full reset RIS (ESC c), which turns both off. Sequences
// may be split anywhere across calls to Write.
//
// The zero value is ready to use, with both modes off. Write must be called by one
// goroutine at a time, with the output in order; Modes may be called at any time from any
// goroutine.
type Tracker struct {
	modes atomic.Uint32 // mode bits; written by Write, read by Modes

	p *ansi.Parser // created by the first Write; touched only by Write
}

// Write scans p, the next bytes of the program's output, and updates the modes. Text
// between sequences is skipped with bytes.IndexByte (so invalid UTF-8 in it cannot hide a
// sequence). It never fails and does not keep p.
func (t *Tracker) Write(p []byte) {
	if t.p == nil {
		t.p = ansi.NewParser()
		t.p.SetDataSize(1) // string sequences (OSC, DCS, …) are not kept
		t.p.SetHandler(ansi.Handler{HandleCsi: t.csi, HandleEsc: t.esc})
	}
	for i := 0; i < len(p); i++ {
		if t.p.State() == parser.GroundState {
			j := bytes.IndexByte(p[i:], ansi.ESC)
			if j < 0 {
				return
			}
			i += j
		}
		c, st := p[i], t.p.State()
		switch {
		case c >= 0x80 && st != parser.GroundState:
			// A byte outside ASCII inside a sequence: not one a terminal
			// would act on (and not text either). Give up on it.
			t.p.Reset()
			continue
		case c < 0x20 && c != ansi.ESC && c != ansi.CAN && c != ansi.SUB && inControl(st):
			// A C0 control inside an escape or control sequence acts on
			// the terminal and leaves the sequence as it was (the parser
			// would forget the sequence's private marker).
			continue
		case c >= 0x3c && c <= 0x3f && st == parser.CsiParamState:
			// A private marker after the parameters makes the sequence
			// malformed: a terminal ignores it (ECMA-48 CSI ignore).
			t.p.Reset()
			continue
		}
		t.p.Advance(c)
	}
}

// inControl reports whether st is inside an escape or control sequence
// (as opposed to text or a string sequence such as OSC).
func inControl(st parser.State) bool {
	switch st {
	case parser.EscapeState, parser.EscapeIntermediateState, parser.CsiEntryState, parser.CsiParamState, parser.CsiIntermediateState:
		return true
	}
	return false
}

// csi handles a complete control sequence: DECSET (ESC[?…h) and DECRST (ESC[?…l).
func (t *Tracker) csi(cmd ansi.Cmd, params ansi.Params) {
	if cmd.Prefix() != '?' || cmd.Intermediate() != 0 || (cmd.Final() != 'h' && cmd.Final() != 'l') {
		return
	}
	var hit uint32
	for i := range params {
		n, more, _ := params.Param(i, 0)
		if more || (i > 0 && params[i-1].HasMore()) {
			return // ':' sub-parameters: not a DECSET/DECRST
		}
		hit |= decModes[n]
	}
	cur := t.modes.Load()
	if cmd.Final() == 'h' {
		t.set(cur | hit)
	} else {
		t.set(cur &^ hit)
	}
}

// esc handles an escape sequence: RIS (ESC c) turns every mode off.
func (t *Tracker) esc(cmd ansi.Cmd) {
	if cmd.Final() == 'c' && cmd.Intermediate() == 0 {
		t.set(0)
	}
}

// Modes returns the modes as of the last Write.
func (t *Tracker) Modes() Modes {
	bits := t.modes.Load()
	return Modes{
		AppCursor:      bits&modeAppCursor != 0,
		BracketedPaste: bits&modeBracketedPaste != 0,
	}
}

// set stores new mode bits when they changed.
func (t *Tracker) set(bits uint32) {
	if t.modes.Load() != bits {
		t.modes.Store(bits)
	}
}
