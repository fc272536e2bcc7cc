package keys

import (
	"bytes"
	"sync/atomic"
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

// Parser states of a Tracker.
const (
	stGround    uint8 = iota // plain text
	stEscape                 // after ESC
	stCSIEntry               // after ESC [
	stDECParam               // after ESC [ ?, reading parameters
	stCSIIgnore              // inside a control sequence the Tracker does not follow
)

// maxParam caps a parameter value so that long digit runs cannot overflow.
const maxParam = 1 << 20

// A Tracker follows the terminal modes a program enables, by scanning the bytes the program
// writes to its terminal. It recognises DECSET and DECRST (ESC[?…h, ESC[?…l) for modes 1
// and 2004, alone or among other parameters (ESC[?1;2004h), and the full reset RIS (ESC c),
// which turns both off. Sequences may be split anywhere across calls to Write.
//
// The zero value is ready to use, with both modes off. Write must be called by one
// goroutine at a time, with the output in order; Modes may be called at any time from any
// goroutine.
type Tracker struct {
	modes atomic.Uint32 // mode bits; written by Write, read by Modes

	// Parser state, touched only by Write.
	state uint8
	param int    // value of the parameter being read
	hit   uint32 // mode bits named by the parameters read so far
}

// Write scans p, the next bytes of the program's output, and updates the modes. Chunks
// without ESC cost one bytes.IndexByte. It never fails and does not keep p.
func (t *Tracker) Write(p []byte) {
	for i := 0; i < len(p); i++ {
		if t.state == stGround {
			j := bytes.IndexByte(p[i:], 0x1b)
			if j < 0 {
				return
			}
			i += j
		}
		t.step(p[i])
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

// step feeds one byte to the parser.
func (t *Tracker) step(c byte) {
	switch {
	case c == 0x1b:
		// ESC starts a new sequence wherever it appears, abandoning any unfinished one.
		t.state = stEscape
		return
	case t.state == stGround:
		return
	case t.state == stEscape:
		switch c {
		case 'c': // RIS
			t.set(0)
			t.state = stGround
		case '[':
			t.param, t.hit = 0, 0
			t.state = stCSIEntry
		default:
			t.state = stGround
		}
		return
	case c == 0x18 || c == 0x1a: // CAN, SUB cancel a sequence
		t.state = stGround
		return
	case c < 0x20 || c == 0x7f: // other controls act but do not end the sequence
		return
	case c >= 0x80: // malformed; give up on the sequence
		t.state = stGround
		return
	case c >= 0x40: // final byte
		if t.state == stDECParam && (c == 'h' || c == 'l') {
			t.endParam()
			cur := t.modes.Load()
			if c == 'h' {
				t.set(cur | t.hit)
			} else {
				t.set(cur &^ t.hit)
			}
		}
		t.state = stGround
		return
	}
	// Parameter (0x30–0x3F) or intermediate (0x20–0x2F) byte.
	switch t.state {
	case stCSIEntry:
		if c == '?' {
			t.state = stDECParam
		} else {
			t.state = stCSIIgnore
		}
	case stDECParam:
		switch {
		case '0' <= c && c <= '9':
			if t.param < maxParam {
				t.param = t.param*10 + int(c-'0')
			}
		case c == ';':
			t.endParam()
		default:
			// ':' sub-parameters, a second '?', or intermediates (ESC[?1$p is DECRQM):
			// not a DECSET/DECRST.
			t.state = stCSIIgnore
		}
	}
}

// endParam records the parameter just read.
func (t *Tracker) endParam() {
	t.hit |= decModes[t.param]
	t.param = 0
}

// set stores new mode bits when they changed.
func (t *Tracker) set(bits uint32) {
	if t.modes.Load() != bits {
		t.modes.Store(bits)
	}
}
