package keys

import "sync/atomic"

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
// writes to its terminal with a [Scanner]. It recognises DECSET and DECRST (ESC[?…h,
// ESC[?…l) for modes 1 and 2004, alone or among other parameters (ESC[?1;2004h), and the
// full reset RIS (ESC c), which turns both off. Sequences may be split anywhere across calls
// to Write.
//
// The zero value is ready to use, with both modes off. Write must be called by one
// goroutine at a time, with the output in order; Modes may be called at any time from any
// goroutine.
type Tracker struct {
	modes atomic.Uint32 // mode bits; written by Write, read by Modes

	sc Scanner // its Handle is set by the first Write; touched only by Write
}

// Write scans p, the next bytes of the program's output, and updates the modes. It never
// fails and does not keep p.
func (t *Tracker) Write(p []byte) {
	if t.sc.Handle == nil {
		t.sc.Handle = t.seq
	}
	t.sc.Write(p)
}

// seq handles a complete sequence: DECSET (ESC[?…h) and DECRST (ESC[?…l) change the modes
// they name, RIS (ESC c) turns every mode off.
func (t *Tracker) seq(q Seq) {
	if !q.CSI {
		if q.Final == 'c' && q.Intermediate == 0 {
			t.set(0)
		}
		return
	}
	if q.Prefix != '?' || q.Intermediate != 0 || (q.Final != 'h' && q.Final != 'l') || q.Sub {
		return // not a DECSET/DECRST (':' sub-parameters make it something else)
	}
	var hit uint32
	for _, n := range q.Params {
		hit |= decModes[n]
	}
	cur := t.modes.Load()
	if q.Final == 'h' {
		t.set(cur | hit)
	} else {
		t.set(cur &^ hit)
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
