package keys

import "strings"

// Bracketed-paste markers.
const (
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// warnPasteOff is the warning of a bracketed paste into a program that has not enabled it.
const warnPasteOff = "bracketed paste mode is off in the program; sent raw text."

// Paste returns the bytes to write for a paste action, and a warning
// ("" when none).
//
// Every ESC[201~ inside text is removed first, repeatedly, so that the result contains none
// and a paste cannot end itself early. The text is then wrapped in ESC[200~ … ESC[201~ when
// pty and bracketed are set and the program has enabled bracketed paste (m.BracketedPaste).
// When pty and bracketed are set but the program has not, the text is sent raw (without
// the removed markers, unwrapped) with the warning `bracketed paste mode is off in the
// program; sent raw text.` A pipe session (pty false) or bracketed false always gets the
// raw text and no warning.
func Paste(text string, bracketed, pty bool, m Modes) (payload []byte, warning string) {
	if !pty || !bracketed {
		return stripPasteEnd(text, 0, 0), ""
	}
	if !m.BracketedPaste {
		return stripPasteEnd(text, 0, 0), warnPasteOff
	}
	out := stripPasteEnd(text, len(pasteStart), len(pasteEnd))
	copy(out, pasteStart)
	return append(out, pasteEnd...), ""
}

// stripPasteEnd returns text without any ESC[201~, leaving head bytes of room before it and
// capacity for tail more bytes after it. Removing one marker can join the bytes around it
// into another ("\x1b[20" + marker + "1~"), so the removal is done as a stack: a byte is
// appended, and a marker completed by it is dropped. Linear in len(text).
func stripPasteEnd(text string, head, tail int) []byte {
	out := make([]byte, head, head+len(text)+tail)
	if !strings.Contains(text, pasteEnd) {
		return append(out, text...)
	}
	for i := 0; i < len(text); i++ {
		out = append(out, text[i])
		if text[i] == '~' && len(out)-head >= len(pasteEnd) && string(out[len(out)-len(pasteEnd):]) == pasteEnd {
			out = out[:len(out)-len(pasteEnd)]
		}
	}
	return out
}
