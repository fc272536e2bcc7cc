// Package visible makes text that an agent or a node controls safe to show
// to a person: every character a terminal or a browser would act on, or
// would draw as nothing or as something else (C0 and C1 controls, DEL,
// bidirectional and other format characters, invisible fillers, every
// space but the ASCII one), is written as a visible escape such as \x1b
// or \u202e, so what the operator reads is what runs.
//
// There is one place per output path where it applies: the CLI's
// standard streams are Writers (Text for people, JSON for --json), the
// control UI escapes in its one element builder with the same classes,
// and the gateway's JSON log goes through a JSON Writer. Backslashes are
// not escaped: an agent that writes the four characters \x1b shows the
// four characters, which is also what runs.
package visible

import (
	"io"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Classes are the Unicode classes whose members are never shown as
// themselves, besides the spaces other than U+0020 (unicode.Zs): controls
// (Cc: C0, DEL, C1), format characters (Cf: bidi embeddings, overrides
// and isolates, zero-width characters, tags), line and paragraph
// separators, and the properties that name characters drawn as nothing
// (which Cf does not fully cover: Hangul fillers, variation selectors,
// combining grapheme joiner) and noncharacters.
var Classes = []*unicode.RangeTable{
	unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Zs,
	unicode.Bidi_Control, unicode.Join_Control,
	unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector,
	unicode.Noncharacter_Code_Point,
}

// Hidden reports whether r is escaped when shown: a member of Classes
// other than the ASCII space.
func Hidden(r rune) bool {
	if r == ' ' {
		return false
	}
	if r < 0x7f {
		return r < 0x20
	}
	return unicode.IsOneOf(Classes, r)
}

// Line returns s with every hidden character escaped, tab and newline
// too: the form for a field that must stay on its line (a command, a
// working directory, a name). Invalid UTF-8 bytes are written \xNN.
func Line(s string) string { return escape(s, false) }

// Text returns s with every hidden character escaped except tab and
// newline: the form for text meant to span lines.
func Text(s string) string { return escape(s, true) }

func escape(s string, keepLines bool) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, n, keepLines) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	return string(appendText(b, s[i:], keepLines))
}

func needsEscape(r rune, n int, keepLines bool) bool {
	if r == utf8.RuneError && n == 1 {
		return true
	}
	if keepLines && (r == '\n' || r == '\t') {
		return false
	}
	return Hidden(r)
}

// appendText appends s to b in the text form.
func appendText(b []byte, s string, keepLines bool) []byte {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = appendHex(append(b, `\x`...), uint32(s[i]), 2)
		case !needsEscape(r, n, keepLines):
			b = append(b, s[i:i+n]...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r <= 0x7f:
			b = appendHex(append(b, `\x`...), uint32(r), 2)
		case r <= 0xffff:
			b = appendHex(append(b, `\u`...), uint32(r), 4)
		default:
			b = appendHex(append(b, `\U`...), uint32(r), 8)
		}
		i += n
	}
	return b
}

// appendJSON appends s, a piece of JSON text, to b with every hidden
// character outside the JSON whitespace written as a JSON escape, which
// leaves each string's value as it was (raw controls and characters above
// ASCII can only stand inside strings). Invalid UTF-8 becomes \ufffd, the
// character a JSON decoder would read.
func appendJSON(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, `\ufffd`...)
		case r == '\n' || r == '\t' || r == '\r' || !Hidden(r):
			b = append(b, s[i:i+n]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			b = appendHex(append(b, `\u`...), uint32(r1), 4)
			b = appendHex(append(b, `\u`...), uint32(r2), 4)
		default:
			b = appendHex(append(b, `\u`...), uint32(r), 4)
		}
		i += n
	}
	return b
}

func appendHex(b []byte, v uint32, digits int) []byte {
	h := strconv.FormatUint(uint64(v), 16)
	for range digits - len(h) {
		b = append(b, '0')
	}
	return append(b, h...)
}

// Mode is what a Writer does to the bytes written to it.
type Mode int

const (
	// ModeText escapes every hidden character but tab and newline
	// (Text). The zero Mode.
	ModeText Mode = iota
	// ModeJSON writes hidden characters as JSON escapes, which keeps a
	// JSON document's values exactly (for --json and JSON logs).
	ModeJSON
	// ModeRaw writes the bytes as they are (the operator asked for the
	// program's own bytes, e.g. `conch log --raw`).
	ModeRaw
)

// Writer escapes what is written to it, by its Mode, before it reaches W.
// A character split across two writes is held until the second (a
// stream copied in chunks keeps its characters, and its JSON its values);
// Flush writes what is held at the end of a stream, escaped as the bytes
// that are not UTF-8 they then are. A Writer is safe for concurrent use;
// Mode must not change while writes are under way. Its zero value writes
// to a nil W: set W.
type Writer struct {
	W    io.Writer
	Mode Mode

	mu    sync.Mutex // guards carry and the writes to W
	carry []byte     // the start of a character the last write ended in
}

// Write escapes p and writes it to w.W; it returns len(p) when the
// escaped form was written whole.
func (w *Writer) Write(p []byte) (int, error) {
	if w.Mode == ModeRaw {
		return w.W.Write(p)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := p
	if len(w.carry) > 0 {
		buf = append(w.carry, p...)
		w.carry = nil
	}
	// Hold an incomplete character at the end for the next write.
	for i := len(buf) - 1; i >= 0 && i > len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				w.carry = append([]byte(nil), buf[i:]...)
				buf = buf[:i]
			}
			break
		}
	}
	if err := w.write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the incomplete character a last write ended in, if any.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.carry
	w.carry = nil
	if len(b) == 0 {
		return nil
	}
	return w.write(b)
}

// write escapes buf by w's mode and writes it; w.mu is held.
func (w *Writer) write(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	s := string(buf)
	var out []byte
	switch w.Mode {
	case ModeJSON:
		out = appendJSON(make([]byte, 0, len(buf)), s)
	default:
		if escape(s, true) == s {
			out = buf
		} else {
			out = appendText(make([]byte, 0, len(buf)+16), s, true)
		}
	}
	_, err := w.W.Write(out)
	return err
}
