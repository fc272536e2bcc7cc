package keys

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

const e = "\x1b" // ESC, short for the tables below

var (
	normal = Modes{}
	appCur = Modes{AppCursor: true}
)

// keyCase is one key token and the bytes it must produce.
type keyCase struct {
	token string
	m     Modes
	want  string
	warn  string // "" = no warning
}

func checkKeys(t *testing.T, cases []keyCase) {
	t.Helper()
	for _, c := range cases {
		parts, warnings := Encode("", nil, []string{c.token}, c.m)
		got := string(bytes.Join(parts, nil))
		if got != c.want {
			t.Errorf("Encode(%q, %+v) = %q, want %q", c.token, c.m, got, c.want)
		}
		if c.want == "" && parts != nil {
			t.Errorf("Encode(%q): parts = %q, want none", c.token, parts)
		}
		if c.want != "" && len(parts) != 1 {
			t.Errorf("Encode(%q): %d parts, want 1", c.token, len(parts))
		}
		var wantWarnings []string
		if c.warn != "" {
			wantWarnings = []string{c.warn}
		}
		if !slices.Equal(warnings, wantWarnings) {
			t.Errorf("Encode(%q): warnings = %q, want %q", c.token, warnings, wantWarnings)
		}
	}
}

// TestNamedKeys covers every named key, each alias, and
// names in several cases.
func TestNamedKeys(t *testing.T) {
	rows := []struct {
		tokens []string
		want   string
	}{
		{[]string{"Enter", "Return"}, "\r"},
		{[]string{"Tab"}, "\t"},
		{[]string{"Escape", "Esc"}, e},
		{[]string{"Space"}, " "},
		{[]string{"BSpace", "Backspace"}, "\x7f"},
		{[]string{"Up"}, e + "[A"},
		{[]string{"Down"}, e + "[B"},
		{[]string{"Right"}, e + "[C"},
		{[]string{"Left"}, e + "[D"},
		{[]string{"Home"}, e + "[1~"},
		{[]string{"End"}, e + "[4~"},
		{[]string{"PageUp", "PgUp", "PPage"}, e + "[5~"},
		{[]string{"PageDown", "PgDn", "NPage"}, e + "[6~"},
		{[]string{"Insert", "IC"}, e + "[2~"},
		{[]string{"Delete", "Del", "DC"}, e + "[3~"},
		{[]string{"BTab", "S-Tab"}, e + "[Z"},
		{[]string{"F1"}, e + "OP"},
		{[]string{"F2"}, e + "OQ"},
		{[]string{"F3"}, e + "OR"},
		{[]string{"F4"}, e + "OS"},
		{[]string{"F5"}, e + "[15~"},
		{[]string{"F6"}, e + "[17~"},
		{[]string{"F7"}, e + "[18~"},
		{[]string{"F8"}, e + "[19~"},
		{[]string{"F9"}, e + "[20~"},
		{[]string{"F10"}, e + "[21~"},
		{[]string{"F11"}, e + "[23~"},
		{[]string{"F12"}, e + "[24~"},
		{[]string{"KP/"}, e + "Oo"},
		{[]string{"KP*"}, e + "Oj"},
		{[]string{"KP-"}, e + "Om"},
		{[]string{"KP+"}, e + "Ok"},
		{[]string{"KP0"}, e + "Op"},
		{[]string{"KP1"}, e + "Oq"},
		{[]string{"KP2"}, e + "Or"},
		{[]string{"KP3"}, e + "Os"},
		{[]string{"KP4"}, e + "Ot"},
		{[]string{"KP5"}, e + "Ou"},
		{[]string{"KP6"}, e + "Ov"},
		{[]string{"KP7"}, e + "Ow"},
		{[]string{"KP8"}, e + "Ox"},
		{[]string{"KP9"}, e + "Oy"},
		{[]string{"KP."}, e + "On"},
		{[]string{"KPEnter"}, e + "OM"},
	}
	var cases []keyCase
	seen := map[string]bool{}
	for _, r := range rows {
		for _, tok := range r.tokens {
			seen[strings.ToLower(tok)] = true
			for _, v := range []string{tok, strings.ToLower(tok), strings.ToUpper(tok), " " + tok + "\t"} {
				cases = append(cases, keyCase{token: v, want: r.want})
			}
		}
	}
	checkKeys(t, cases)

	// Every name in the table is covered above (S-Tab is a rule, not a name).
	for name := range named {
		if !seen[name] {
			t.Errorf("key %q is in the table but not in the test", name)
		}
	}
}

// TestAppCursor: with DECCKM on, unmodified Up Down Right Left Home End use SS3; other keys
// and modified keys do not change.
func TestAppCursor(t *testing.T) {
	checkKeys(t, []keyCase{
		{token: "Up", m: appCur, want: e + "OA"},
		{token: "Down", m: appCur, want: e + "OB"},
		{token: "Right", m: appCur, want: e + "OC"},
		{token: "Left", m: appCur, want: e + "OD"},
		{token: "Home", m: appCur, want: e + "OH"},
		{token: "End", m: appCur, want: e + "OF"},
		{token: "up", m: appCur, want: e + "OA"},
		{token: "HOME", m: appCur, want: e + "OH"},

		{token: "PageUp", m: appCur, want: e + "[5~"},
		{token: "PageDown", m: appCur, want: e + "[6~"},
		{token: "Insert", m: appCur, want: e + "[2~"},
		{token: "Delete", m: appCur, want: e + "[3~"},
		{token: "Enter", m: appCur, want: "\r"},
		{token: "F1", m: appCur, want: e + "OP"},
		{token: "x", m: appCur, want: "x"},

		{token: "C-Up", m: appCur, want: e + "[1;5A"},
		{token: "S-Left", m: appCur, want: e + "[1;2D"},
		{token: "M-Home", m: appCur, want: e + "[1;3~"},
		{token: "C-End", m: appCur, want: e + "[4;5~"},

		// Bracketed paste mode alone changes nothing.
		{token: "Up", m: Modes{BracketedPaste: true}, want: e + "[A"},
		{token: "Up", m: Modes{AppCursor: true, BracketedPaste: true}, want: e + "OA"},
	})
}

// TestModifiers covers the modifier prefixes (C-, M-, S-, ^X), the xterm codes of
// modified navigation keys, and the single-character rules.
func TestModifiers(t *testing.T) {
	checkKeys(t, []keyCase{
		// Spec examples.
		{token: "C-M-x", want: e + "\x18"},
		{token: "C-c", want: "\x03"},
		{token: "C-[", want: e},
		{token: "C-@", want: "\x00"},
		{token: "C-?", want: "\x7f"},
		{token: "M-x", want: e + "x"},
		{token: "C-Up", want: e + "[1;5A"},
		{token: "C-Delete", want: e + "[3;5~"},
		{token: "C-Home", want: e + "[1;5~"},
		{token: "M-Enter", want: e + "\r"},

		// Order and case of prefixes do not matter; repeats are harmless.
		{token: "M-C-x", want: e + "\x18"},
		{token: "m-c-x", want: e + "\x18"},
		{token: "c-M-X", want: e + "\x18"},
		{token: "C-C-c", want: "\x03"},
		{token: "S-M-C-Up", want: e + "[1;8A"},
		{token: "c-s-m-up", want: e + "[1;8A"},

		// Ctrl: upper-cased first, then code & 0x1F when the code is 64–95.
		{token: "C-a", want: "\x01"},
		{token: "C-A", want: "\x01"},
		{token: "C-z", want: "\x1a"},
		{token: "C-Z", want: "\x1a"},
		{token: "C-\\", want: "\x1c"},
		{token: "C-]", want: "\x1d"},
		{token: "C-^", want: "\x1e"},
		{token: "C-_", want: "\x1f"},
		{token: "C-d", want: "\x04"},
		{token: "C-1", want: "1"},  // no control code: sent as is
		{token: "C- ", want: "C-"}, // trimmed to "C-": plain text
		{token: "C-é", want: "é"},  // non-ASCII: no control code
		{token: "C-ı", want: "ı"},  // dotless i does not fold into 'I'
		{token: "C-M-?", want: e + "\x7f"},

		// Caret form: exactly two characters.
		{token: "^c", want: "\x03"},
		{token: "^C", want: "\x03"},
		{token: "^[", want: e},
		{token: "^@", want: "\x00"},
		{token: "^?", want: "\x7f"},
		{token: "^^", want: "\x1e"},
		{token: " ^d ", want: "\x04"},
		{token: "^", want: "^"},
		{token: "^1", want: "^1"},   // no control code: the two characters
		{token: "^cc", want: "^cc"}, // not exactly two: literal, no modifiers, no warning
		{token: "M-^c", want: "^c", warn: `Unknown key "^c" for modifiers; sending literal.`},

		// Shift: a lower-case letter is upper-cased; nothing else changes.
		{token: "S-a", want: "A"},
		{token: "S-A", want: "A"},
		{token: "S-1", want: "1"},
		{token: "S-é", want: "É"},
		{token: "C-S-a", want: "\x01"},
		{token: "M-S-a", want: e + "A"},

		// Alt: ESC prefix.
		{token: "M-X", want: e + "X"},
		{token: "M-1", want: e + "1"},
		{token: "M-é", want: e + "é"},
		{token: "M--", want: e + "-"},
		{token: "M-C-[", want: e + e},

		// Navigation keys with modifiers: xterm codes, mod = 1 + shift + 2·alt + 4·ctrl.
		{token: "S-Up", want: e + "[1;2A"},
		{token: "M-Up", want: e + "[1;3A"},
		{token: "M-S-Down", want: e + "[1;4B"},
		{token: "C-Right", want: e + "[1;5C"},
		{token: "C-S-Left", want: e + "[1;6D"},
		{token: "C-M-Up", want: e + "[1;7A"},
		{token: "C-M-S-Up", want: e + "[1;8A"},
		{token: "S-Home", want: e + "[1;2~"},
		{token: "C-Insert", want: e + "[2;5~"},
		{token: "S-IC", want: e + "[2;2~"},
		{token: "M-Del", want: e + "[3;3~"},
		{token: "C-DC", want: e + "[3;5~"},
		{token: "C-End", want: e + "[4;5~"},
		{token: "S-PageUp", want: e + "[5;2~"},
		{token: "C-PgUp", want: e + "[5;5~"},
		{token: "C-PPage", want: e + "[5;5~"},
		{token: "S-PageDown", want: e + "[6;2~"},
		{token: "M-PgDn", want: e + "[6;3~"},
		{token: "C-NPage", want: e + "[6;5~"},

		// Other named keys: alt adds ESC; ctrl (and shift, except on Tab) is ignored.
		{token: "M-Tab", want: e + "\t"},
		{token: "M-Escape", want: e + e},
		{token: "M-Space", want: e + " "},
		{token: "M-BSpace", want: e + "\x7f"},
		{token: "M-F1", want: e + e + "OP"},
		{token: "M-F5", want: e + e + "[15~"},
		{token: "M-KPEnter", want: e + e + "OM"},
		{token: "M-BTab", want: e + e + "[Z"},
		{token: "C-Enter", want: "\r"},
		{token: "C-Space", want: " "},
		{token: "C-Tab", want: "\t"},
		{token: "C-F5", want: e + "[15~"},
		{token: "S-Enter", want: "\r"},
		{token: "S-F1", want: e + "OP"},
		{token: "C-M-Enter", want: e + "\r"},

		// Shift-Tab is BTab, with whatever other modifiers.
		{token: "S-Tab", want: e + "[Z"},
		{token: "s-tab", want: e + "[Z"},
		{token: "C-S-Tab", want: e + "[Z"},
		{token: "M-S-Tab", want: e + e + "[Z"},
		{token: "S-BTab", want: e + "[Z"},
	})
}

// TestEdgeTokens covers tokens at the borders of the grammar.
func TestEdgeTokens(t *testing.T) {
	checkKeys(t, []keyCase{
		{token: "", want: ""},
		{token: "   ", want: ""},
		{token: "\t\n", want: ""},
		{token: "-", want: "-"},
		{token: "--", want: "--"},
		{token: "C-", want: "C-"}, // a prefix needs something after it
		{token: "M-", want: "M-"},
		{token: "C--", want: "-"}, // ctrl + '-', which has no control code
		{token: "C-M-", want: "M-", warn: `Unknown key "M-" for modifiers; sending literal.`},
		{token: "x", want: "x"},
		{token: "X", want: "X"},
		{token: "é", want: "é"},
		{token: "日", want: "日"},
		{token: "\xff", want: "\xff"},
		{token: "M-\xff", want: e + "\xff"},
		{token: "C-\xff", want: "\xff"},
		{token: "a-b", want: "a-b"},       // 'a' is not a modifier: literal, no warning
		{token: "X-Up", want: "X-Up"},     // neither
		{token: "Ctrl-c", want: "Ctrl-c"}, // not the prefix syntax
		{token: "hello", want: "hello"},   // unknown, no modifiers: no warning
		{token: "C-foo", want: "foo", warn: `Unknown key "foo" for modifiers; sending literal.`},
		{token: "M-S-Foo", want: "Foo", warn: `Unknown key "Foo" for modifiers; sending literal.`},
		{token: "C-Ctrl", want: "Ctrl", warn: `Unknown key "Ctrl" for modifiers; sending literal.`},
		{token: "F13", want: "F13"},
		{token: "C-F13", want: "F13", warn: `Unknown key "F13" for modifiers; sending literal.`},
		{token: "KP", want: "KP"},
		{token: "Upp", want: "Upp"},
		{token: "C-日本", want: "日本", warn: `Unknown key "日本" for modifiers; sending literal.`},
		{token: "Kp0", want: e + "Op"},
		{token: "\u212Ap0", want: "\u212Ap0"}, // Kelvin sign does not fold into 'k'
		{token: " C-c ", want: "\x03"},
	})
}

func TestHex(t *testing.T) {
	valid := map[string]byte{
		"0d": 0x0d, "0x0a": 0x0a, "0X0A": 0x0a, "0xff": 0xff, "FF": 0xff, "ff": 0xff,
		"a": 0x0a, "0": 0, "00": 0, "0x0": 0, "7f": 0x7f, "1b": 0x1b, " 1b ": 0x1b, "0xA": 0x0a,
	}
	for raw, want := range valid {
		parts, warnings := Encode("", []string{raw}, nil, normal)
		if len(parts) != 1 || !bytes.Equal(parts[0], []byte{want}) || warnings != nil {
			t.Errorf("hex %q: parts %q warnings %q, want one byte %#02x", raw, parts, warnings, want)
		}
	}
	for _, raw := range []string{"zz", "", " ", "0x", "0X", "x0", "100", "0x100", "0xg", "g", "-1", "+1",
		"0x 1", "1 2", "0b1", "0x0x1", "\\x1b", "１"} {
		parts, warnings := Encode("", []string{raw}, nil, normal)
		want := []string{"Invalid hex byte: " + raw}
		if parts != nil || !slices.Equal(warnings, want) {
			t.Errorf("hex %q: parts %q warnings %q, want no part and %q", raw, parts, warnings, want)
		}
	}
}

// TestEncodeSpecExample: literal, hex (one invalid item) and a key, in that order.
func TestEncodeSpecExample(t *testing.T) {
	parts, warnings := Encode("hi", []string{"0d", "0x0a", "zz"}, []string{"Enter"}, normal)
	if got := string(bytes.Join(parts, nil)); got != "hi\r\n\r" {
		t.Errorf("payload = %q, want %q", got, "hi\r\n\r")
	}
	if want := []string{"Invalid hex byte: zz"}; !slices.Equal(warnings, want) {
		t.Errorf("warnings = %q, want %q", warnings, want)
	}
	// One part for the literal, one per valid hex item, one per key.
	if want := [][]byte{[]byte("hi"), {'\r'}, {'\n'}, {'\r'}}; !slices.EqualFunc(parts, want, bytes.Equal) {
		t.Errorf("parts = %q, want %q", parts, want)
	}
}

func TestEncodeParts(t *testing.T) {
	tests := []struct {
		literal  string
		hex      []string
		keys     []string
		m        Modes
		parts    []string
		warnings []string
	}{
		{},
		{keys: []string{"", " ", ""}},
		{hex: []string{"zz"}, warnings: []string{"Invalid hex byte: zz"}},
		{literal: "ls -l", keys: []string{"Enter"}, parts: []string{"ls -l", "\r"}},
		{literal: "日本", parts: []string{"日本"}},
		{keys: []string{"C-c", "", "Up", "q"}, m: appCur, parts: []string{"\x03", e + "OA", "q"}},
		{
			literal:  "x",
			hex:      []string{"q", "41", "0xz"},
			keys:     []string{"C-foo", "Tab", "M-bar"},
			parts:    []string{"x", "A", "foo", "\t", "bar"},
			warnings: []string{"Invalid hex byte: q", "Invalid hex byte: 0xz", `Unknown key "foo" for modifiers; sending literal.`, `Unknown key "bar" for modifiers; sending literal.`},
		},
		// Order is literal, hex, keys, whatever the order of the fields.
		{literal: "a", hex: []string{"62"}, keys: []string{"c"}, parts: []string{"a", "b", "c"}},
	}
	for i, tt := range tests {
		parts, warnings := Encode(tt.literal, tt.hex, tt.keys, tt.m)
		var got []string
		for _, p := range parts {
			got = append(got, string(p))
		}
		if !slices.Equal(got, tt.parts) {
			t.Errorf("%d: parts = %q, want %q", i, got, tt.parts)
		}
		if !slices.Equal(warnings, tt.warnings) {
			t.Errorf("%d: warnings = %q, want %q", i, warnings, tt.warnings)
		}
		if (parts == nil) != (len(tt.parts) == 0) {
			t.Errorf("%d: parts = %#v, want nil exactly when empty", i, parts)
		}
	}
}

// TestNavigationModifierMatrix checks every navigation key under every modifier set
// against the xterm formula written out independently.
func TestNavigationModifierMatrix(t *testing.T) {
	nav := map[string]string{ // name → "<n>~" or the arrow letter
		"Up": "A", "Down": "B", "Right": "C", "Left": "D",
		"Home": "1~", "Insert": "2~", "IC": "2~", "Delete": "3~", "Del": "3~", "DC": "3~", "End": "4~",
		"PageUp": "5~", "PgUp": "5~", "PPage": "5~", "PageDown": "6~", "PgDn": "6~", "NPage": "6~",
	}
	prefixes := []struct {
		p   string
		mod int
	}{
		{"S-", 2}, {"M-", 3}, {"S-M-", 4}, {"M-S-", 4}, {"C-", 5}, {"C-S-", 6}, {"S-C-", 6},
		{"C-M-", 7}, {"M-C-", 7}, {"C-M-S-", 8}, {"S-C-M-", 8}, {"m-s-c-", 8},
	}
	var cases []keyCase
	for name, code := range nav {
		for _, p := range prefixes {
			var want string
			if n, ok := strings.CutSuffix(code, "~"); ok {
				want = fmt.Sprintf("%s[%s;%d~", e, n, p.mod)
			} else {
				want = fmt.Sprintf("%s[1;%d%s", e, p.mod, code)
			}
			cases = append(cases, keyCase{token: p.p + name, want: want}, keyCase{token: p.p + name, m: appCur, want: want})
		}
	}
	checkKeys(t, cases)
}

func FuzzEncode(f *testing.F) {
	for _, s := range []string{"C-M-x", "^c", "S-Tab", "C-", "-", "Up", "M-é", "\xff", "C-foo"} {
		f.Add(s, "0x1b", false)
	}
	f.Fuzz(func(t *testing.T, token, hex string, app bool) {
		parts, warnings := Encode("", []string{hex}, []string{token}, Modes{AppCursor: app})
		for _, p := range parts {
			if len(p) == 0 {
				t.Fatalf("empty part for %q %q", token, hex)
			}
		}
		if len(parts)+len(warnings) > 3 {
			t.Fatalf("too many results for %q %q: %q %q", token, hex, parts, warnings)
		}
	})
}
