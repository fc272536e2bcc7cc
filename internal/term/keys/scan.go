package keys

import (
	"bytes"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// A Seq is one complete escape sequence (ESC …) or control sequence (ESC [ …) found in a
// program's terminal output by a [Scanner].
type Seq struct {
	// CSI is true for a control sequence (ESC [ …), false for an escape sequence.
	CSI bool
	// Prefix is a control sequence's private marker ('?', '>', '<', '='), or 0.
	Prefix byte
	// Intermediate is the last intermediate byte (0x20–0x2f), or 0.
	Intermediate byte
	// Final is the final byte.
	Final byte
	// Params are a control sequence's parameters in order, -1 for an empty one (ESC[;5H
	// has -1 and 5). The slice is reused: it is valid only during the call.
	Params []int
	// Sub is set when a parameter has ':' sub-parameters (ESC[38:2:…m).
	Sub bool
}

// A Scanner finds the escape and control sequences in a program's terminal output, as a
// terminal would: with the DEC / ECMA-48 parser of github.com/charmbracelet/x/ansi, held
// to ECMA-48 where that parser is lenient (a C0 control inside a sequence acts and leaves
// the sequence as it was; a byte outside ASCII or a misplaced private marker abandons it).
// String sequences (OSC, DCS, APC, …) are passed over. Sequences may be split anywhere
// across calls to Write. Text between sequences is skipped with bytes.IndexByte, so invalid
// UTF-8 in it cannot hide a sequence.
//
// The zero value is ready to use once Handle is set. Write must be called by one goroutine
// at a time, with the output in order.
type Scanner struct {
	// Handle is called with each complete sequence.
	Handle func(Seq)

	p      *ansi.Parser // created by the first Write
	params []int
}

// Write scans p, the next bytes of the output, calling Handle for each sequence it
// completes. It does not keep p.
func (s *Scanner) Write(p []byte) {
	if s.p == nil {
		s.p = ansi.NewParser()
		s.p.SetDataSize(1) // string sequences (OSC, DCS, …) are not kept
		s.p.SetHandler(ansi.Handler{HandleCsi: s.csi, HandleEsc: s.esc})
	}
	for i := 0; i < len(p); i++ {
		if s.p.State() == parser.GroundState {
			j := bytes.IndexByte(p[i:], ansi.ESC)
			if j < 0 {
				return
			}
			i += j
		}
		c, st := p[i], s.p.State()
		switch {
		case c >= 0x80 && st != parser.GroundState:
			// A byte outside ASCII inside a sequence: not one a terminal
			// would act on (and not text either). Give up on it.
			s.p.Reset()
			continue
		case c < 0x20 && c != ansi.ESC && c != ansi.CAN && c != ansi.SUB && inControl(st):
			// A C0 control inside an escape or control sequence acts on
			// the terminal and leaves the sequence as it was (the parser
			// would forget the sequence's private marker).
			continue
		case c >= 0x3c && c <= 0x3f && st == parser.CsiParamState:
			// A private marker after the parameters makes the sequence
			// malformed: a terminal ignores it (ECMA-48 CSI ignore).
			s.p.Reset()
			continue
		}
		s.p.Advance(c)
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

func (s *Scanner) csi(cmd ansi.Cmd, params ansi.Params) {
	q := Seq{CSI: true, Prefix: cmd.Prefix(), Intermediate: cmd.Intermediate(), Final: cmd.Final()}
	s.params = s.params[:0]
	for _, p := range params {
		s.params = append(s.params, p.Param(-1))
		q.Sub = q.Sub || p.HasMore()
	}
	q.Params = s.params
	s.Handle(q)
}

func (s *Scanner) esc(cmd ansi.Cmd) {
	s.Handle(Seq{Prefix: cmd.Prefix(), Intermediate: cmd.Intermediate(), Final: cmd.Final()})
}
