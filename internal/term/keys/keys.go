// Package keys turns the inputs of the process tool's send-keys and paste actions into the
// bytes a terminal program expects, and follows the terminal modes that change those bytes.
//
// [Encode] implements send-keys: a literal, hex bytes and key tokens such as "Enter",
// "C-c", "M-x", "^D", "S-Up" or "F5". [Paste] implements paste (bracketed only when the
// program enabled it). Both depend on the [Modes] the program has enabled, which a
// [Tracker] follows by scanning the program's output.
//
// The package does no I/O; it only builds byte slices and warning texts.
package keys

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

const esc = "\x1b"

// key is one row of the named-key table.
type key struct {
	// seq is sent for the key without modifiers (and, for cursor keys, with DECCKM off).
	seq string
	// app replaces seq for the unmodified key while application cursor mode (DECCKM) is on;
	// "" means the mode does not change the key.
	app string
	// shifted replaces seq when the key carries shift ("" = shift is ignored): Tab becomes BTab.
	shifted string
	// final marks a navigation key: with any modifier it is sent in xterm's form
	// ESC[<num>;<mod><final>. 0 for keys that are not navigation keys.
	final byte
	num   int
}

// arrow is a cursor key: ESC[<c>, ESC O <c> in application cursor mode, ESC[1;<mod><c> modified.
func arrow(c byte) key {
	return key{seq: esc + "[" + string(c), app: esc + "O" + string(c), final: c, num: 1}
}

// tilde is a navigation key of the form ESC[<n>~, modified ESC[<n>;<mod>~; app is its
// application-cursor-mode form, if the mode changes it.
func tilde(n int, app string) key {
	return key{seq: esc + "[" + strconv.Itoa(n) + "~", app: app, final: '~', num: n}
}

// ss3 is a key sent as ESC O <c> (F1–F4, keypad).
func ss3(c byte) key { return key{seq: esc + "O" + string(c)} }

// csi is a key sent as ESC [ <s> whatever the modifiers (F5–F12, BTab).
func csi(s string) key { return key{seq: esc + "[" + s} }

// named is the table of named keys (docs/tools.md, "Keys"), indexed by lower-case name.
var named = map[string]key{
	"enter":     {seq: "\r"},
	"return":    {seq: "\r"},
	"tab":       {seq: "\t", shifted: esc + "[Z"},
	"escape":    {seq: esc},
	"esc":       {seq: esc},
	"space":     {seq: " "},
	"bspace":    {seq: "\x7f"},
	"backspace": {seq: "\x7f"},

	"up":    arrow('A'),
	"down":  arrow('B'),
	"right": arrow('C'),
	"left":  arrow('D'),

	"home":     tilde(1, esc+"OH"),
	"insert":   tilde(2, ""),
	"ic":       tilde(2, ""),
	"delete":   tilde(3, ""),
	"del":      tilde(3, ""),
	"dc":       tilde(3, ""),
	"end":      tilde(4, esc+"OF"),
	"pageup":   tilde(5, ""),
	"pgup":     tilde(5, ""),
	"ppage":    tilde(5, ""),
	"pagedown": tilde(6, ""),
	"pgdn":     tilde(6, ""),
	"npage":    tilde(6, ""),

	"btab": csi("Z"),

	"f1":  ss3('P'),
	"f2":  ss3('Q'),
	"f3":  ss3('R'),
	"f4":  ss3('S'),
	"f5":  csi("15~"),
	"f6":  csi("17~"),
	"f7":  csi("18~"),
	"f8":  csi("19~"),
	"f9":  csi("20~"),
	"f10": csi("21~"),
	"f11": csi("23~"),
	"f12": csi("24~"),

	"kp/":     ss3('o'),
	"kp*":     ss3('j'),
	"kp-":     ss3('m'),
	"kp+":     ss3('k'),
	"kp.":     ss3('n'),
	"kpenter": ss3('M'),
	"kp0":     ss3('p'),
	"kp1":     ss3('q'),
	"kp2":     ss3('r'),
	"kp3":     ss3('s'),
	"kp4":     ss3('t'),
	"kp5":     ss3('u'),
	"kp6":     ss3('v'),
	"kp7":     ss3('w'),
	"kp8":     ss3('x'),
	"kp9":     ss3('y'),
}

// modifier is a set of modifier keys. The bit values are xterm's: the modifier parameter of
// a modified key is 1 + the set.
type modifier uint8

const (
	shift modifier = 1 << iota
	alt
	ctrl
)

// prefixes maps the letter of an "X-" prefix, in either case, to its modifier.
var prefixes = map[byte]modifier{
	's': shift, 'S': shift,
	'm': alt, 'M': alt,
	'c': ctrl, 'C': ctrl,
}

// Encode builds the payload of a send-keys action: literal, then
// one byte per valid hex item, then each key token, in that order.
//
// The payload is returned as parts so that a caller honouring delayMs can pause between
// them: one part for a non-empty literal, one per valid hex item, one per key token that
// produces bytes. Parts are never empty, so the payload is empty exactly when parts is;
// their concatenation is the payload to write when there is no delay.
//
// Key tokens are trimmed; names are case-insensitive; an empty token sends nothing. m
// selects the application-cursor-mode forms of unmodified Up, Down, Right, Left, Home and
// End. warnings holds, in input order, `Invalid hex byte: <raw>` for each hex item that is
// not an optional 0x/0X followed by one or two hex digits (the item is skipped), and
// `Unknown key "<base>" for modifiers; sending literal.` for each token that carried
// modifier prefixes but whose rest is neither a key name nor a single character (the rest
// is sent as is).
func Encode(literal string, hex, keys []string, m Modes) (parts [][]byte, warnings []string) {
	if literal != "" {
		parts = append(parts, []byte(literal))
	}
	for _, raw := range hex {
		b, ok := parseHex(raw)
		if !ok {
			warnings = append(warnings, "Invalid hex byte: "+raw)
			continue
		}
		parts = append(parts, []byte{b})
	}
	for _, raw := range keys {
		seq, warning := encodeKey(raw, m)
		if warning != "" {
			warnings = append(warnings, warning)
		}
		if seq != "" {
			parts = append(parts, []byte(seq))
		}
	}
	return parts, warnings
}

// parseHex reads one hex item: surrounding space, an optional 0x or 0X, then one or two hex
// digits.
func parseHex(raw string) (byte, bool) {
	s := strings.TrimSpace(raw)
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	if len(s) < 1 || len(s) > 2 {
		return 0, false
	}
	var v byte
	for i := 0; i < len(s); i++ {
		d, ok := hexDigit(s[i])
		if !ok {
			return 0, false
		}
		v = v<<4 | d
	}
	return v, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// encodeKey encodes one key token and returns its bytes and a warning
// ("" when none).
func encodeKey(raw string, m Modes) (seq, warning string) {
	token := strings.TrimSpace(raw)
	if token == "" {
		return "", ""
	}
	// Caret form: exactly two bytes, "^X" = ctrl-X. When X has no control code (^1) the
	// token falls through and is sent as the two characters.
	if len(token) == 2 && token[0] == '^' {
		if c, ok := control(rune(token[1])); ok {
			return string(c), ""
		}
	}
	mods, base := parseModifiers(token)
	if k, ok := named[asciiLower(base)]; ok {
		return k.encode(mods, m), ""
	}
	if utf8.RuneCountInString(base) == 1 {
		return encodeChar(base, mods), ""
	}
	if mods != 0 {
		warning = `Unknown key "` + base + `" for modifiers; sending literal.`
	}
	return base, warning
}

// parseModifiers strips the "C-", "M-" and "S-" prefixes (any order, any case, repeats
// allowed) from token. A prefix is taken only when something follows it, so "C-" alone and
// "-" are plain text and "C--" is ctrl + "-".
func parseModifiers(token string) (modifier, string) {
	var mods modifier
	for len(token) > 2 && token[1] == '-' {
		mod, ok := prefixes[token[0]]
		if !ok {
			break
		}
		mods |= mod
		token = token[2:]
	}
	return mods, token
}

// encode returns the bytes of a named key with mods, in terminal modes m.
func (k key) encode(mods modifier, m Modes) string {
	if k.final != 0 {
		switch {
		case mods != 0:
			// xterm: mod = 1 + shift + 2·alt + 4·ctrl, which is how the bits are laid out.
			return esc + "[" + strconv.Itoa(k.num) + ";" + strconv.Itoa(1+int(mods)) + string(k.final)
		case m.AppCursor && k.app != "":
			return k.app
		default:
			return k.seq
		}
	}
	seq := k.seq
	if mods&shift != 0 && k.shifted != "" {
		seq = k.shifted
	}
	// Ctrl (and shift, except where shifted says otherwise) on other named keys is ignored.
	if mods&alt != 0 {
		return esc + seq
	}
	return seq
}

// encodeChar applies mods to the single character s: shift upper-cases a lower-case
// letter, ctrl maps to the control code (when the character has one), alt prefixes ESC.
func encodeChar(s string, mods modifier) string {
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size <= 1 {
		// Not valid UTF-8: send the byte as is; only alt applies.
		if mods&alt != 0 {
			return esc + s
		}
		return s
	}
	if mods&shift != 0 {
		r = toUpper(r)
		s = string(r)
	}
	if mods&ctrl != 0 {
		if c, ok := control(r); ok {
			s = string(c)
		}
	}
	if mods&alt != 0 {
		s = esc + s
	}
	return s
}

// control returns the control code for ctrl-r: '?' is DEL; otherwise r is upper-cased
// (ASCII) and, if it is in '@'..'_' (64–95), mapped to r & 0x1F (C-@ NUL, C-c 0x03, C-[ ESC).
func control(r rune) (byte, bool) {
	if r == '?' {
		return 0x7f, true
	}
	if 'a' <= r && r <= 'z' {
		r -= 'a' - 'A'
	}
	if '@' <= r && r <= '_' {
		return byte(r) & 0x1f, true
	}
	return 0, false
}

// toUpper upper-cases a lower-case letter; other runes are returned unchanged.
func toUpper(r rune) rune {
	if unicode.IsLower(r) {
		return unicode.ToUpper(r)
	}
	return r
}

// asciiLower lower-cases ASCII letters only, so that no non-ASCII rune folds into a key name.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
