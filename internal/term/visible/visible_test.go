package visible

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// hiddenRunes is every rune Hidden reports, generated from the whole code
// space (not a hand list).
func hiddenRunes() []rune {
	var rs []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if utf8.ValidRune(r) && Hidden(r) {
			rs = append(rs, r)
		}
	}
	return rs
}

// TestHiddenCoversTheClasses: every control, format character, separator
// and default-ignorable character is hidden, and nothing a person reads as
// itself (letters, digits, punctuation, ASCII space) is.
func TestHiddenCoversTheClasses(t *testing.T) {
	must := []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Bidi_Control,
		unicode.Join_Control, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		if unicode.IsOneOf(must, r) && !Hidden(r) {
			t.Errorf("%U is not hidden", r)
		}
		if unicode.Is(unicode.Zs, r) && r != ' ' && !Hidden(r) {
			t.Errorf("space %U is not hidden", r)
		}
		if (r == ' ' || unicode.In(r, unicode.L, unicode.N, unicode.P, unicode.S)) && Hidden(r) &&
			!unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) && !unicode.Is(unicode.Noncharacter_Code_Point, r) {
			t.Errorf("%U (%q) is hidden", r, r)
		}
	}
	// The examples of the attack: the CSI that erases a line, a right-to-left override.
	for _, r := range []rune{0x1b, '\r', 0x7f, 0x9b, 0x202e, 0x200b, 0x2066, 0xfeff, 0xe0001, 0x3164} {
		if !Hidden(r) {
			t.Errorf("%U is not hidden", r)
		}
	}
}

// unescape reads the escapes Line writes, to show that they name the
// character (or byte) they replace.
func unescape(t *testing.T, s string) []byte {
	t.Helper()
	var out []byte
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			out = append(out, s[i])
			i++
			continue
		}
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[i+1]]
		switch s[i+1] {
		case 'n', 't', 'r':
			out = append(out, map[byte]byte{'n': '\n', 't': '\t', 'r': '\r'}[s[i+1]])
			i += 2
			continue
		}
		if n == 0 || i+2+n > len(s) {
			t.Fatalf("bad escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32)
		if err != nil {
			t.Fatalf("bad escape in %q: %v", s, err)
		}
		if n == 2 {
			out = append(out, byte(v))
		} else {
			out = utf8.AppendRune(out, rune(v))
		}
		i += 2 + n
	}
	return out
}

// TestLineEscapesEveryHiddenRune: each hidden rune, alone and between
// letters, comes out as printable ASCII that names it; Text keeps tab and
// newline and escapes the rest the same way.
func TestLineEscapesEveryHiddenRune(t *testing.T) {
	rs := hiddenRunes()
	if len(rs) < 400 {
		t.Fatalf("only %d hidden runes", len(rs))
	}
	for _, r := range rs {
		in := "A" + string(r) + "B"
		got := Line(in)
		for _, c := range got {
			if c > 0x7e || c < 0x20 {
				t.Fatalf("Line(%q) = %q: holds %U", in, got, c)
			}
		}
		if back := unescape(t, got); string(back) != in {
			t.Fatalf("Line(%q) = %q reads back as %q", in, got, back)
		}
		text := Text(in)
		if r == '\n' || r == '\t' {
			if text != in {
				t.Errorf("Text(%q) = %q", in, text)
			}
		} else if text != got {
			t.Errorf("Text(%q) = %q, Line %q", in, text, got)
		}
	}
	for _, s := range []string{"", "plain ascii", "héllo wörld — ok", "日本語", "emoji 👍", `a\x1b literal`} {
		if Line(s) != s {
			t.Errorf("Line(%q) = %q", s, Line(s))
		}
	}
	// Bytes that are not UTF-8: \xNN each (never the 8-bit CSI itself).
	if got := Line("a\x9b2Kb\xff"); got != `a\x9b2Kb\xff` {
		t.Errorf("invalid UTF-8: %q", got)
	}
}

// TestWriterModes: text escapes, JSON keeps every value (decoded, the
// output equals the input) with no hidden character left raw, raw keeps
// the bytes.
func TestWriterModes(t *testing.T) {
	var all strings.Builder
	for _, r := range hiddenRunes() {
		all.WriteString("<" + string(r) + ">")
	}
	src := all.String()

	var b bytes.Buffer
	(&Writer{W: &b}).Write([]byte(src))
	if b.String() != Text(src) {
		t.Error("text mode differs from Text")
	}

	doc, _ := json.Marshal(map[string]any{"s": src, "list": []string{src, "x"}})
	doc = append(doc, '\n')
	b.Reset()
	if n, err := (&Writer{W: &b, Mode: ModeJSON}).Write(doc); err != nil || n != len(doc) {
		t.Fatalf("write: %d %v", n, err)
	}
	for _, c := range b.String() {
		if Hidden(c) && c != '\n' {
			t.Fatalf("JSON mode left %U raw", c)
		}
	}
	var v1, v2 any
	json.Unmarshal(doc, &v1)
	if err := json.Unmarshal(b.Bytes(), &v2); err != nil {
		t.Fatalf("JSON mode wrote invalid JSON: %v", err)
	}
	if a, b := mustJSON(v1), mustJSON(v2); a != b {
		t.Error("JSON mode changed a value")
	}
	// A DEL the encoder leaves raw, and bytes that are not UTF-8.
	b.Reset()
	(&Writer{W: &b, Mode: ModeJSON}).Write([]byte("{\"a\":\"x\x7fy\xff\"}"))
	if b.String() != `{"a":"x\u007fy\ufffd"}` {
		t.Errorf("JSON mode: %q", b.String())
	}

	b.Reset()
	(&Writer{W: &b, Mode: ModeRaw}).Write([]byte(src))
	if b.String() != src {
		t.Error("raw mode changed the bytes")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestLogLines: the gateway's logs, a slog text handler on a text Writer
// and a JSON handler on a JSON Writer (internal/cli/serve.go), show every
// hidden character escaped, in the message, a value and a key; the JSON
// line still decodes to what was logged. slog's text handler alone
// quotes controls and format characters but writes fillers and variation
// selectors (letters and marks to strconv) as they are.
func TestLogLines(t *testing.T) {
	var all strings.Builder
	for _, r := range hiddenRunes() {
		all.WriteRune(r)
	}
	src := all.String()
	for _, json_ := range []bool{false, true} {
		var b bytes.Buffer
		var h slog.Handler
		if json_ {
			h = slog.NewJSONHandler(&Writer{W: &b, Mode: ModeJSON}, nil)
		} else {
			h = slog.NewTextHandler(&Writer{W: &b}, nil)
		}
		slog.New(h).Info("run "+src, "command", src, src, "key")
		line := strings.TrimSuffix(b.String(), "\n")
		for _, c := range line {
			if Hidden(c) {
				t.Fatalf("json=%v: %U raw in the log line", json_, c)
			}
		}
		if json_ {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil || m["command"] != src || m["msg"] != "run "+src || m[src] != "key" {
				t.Errorf("the JSON log line does not decode to what was logged: %v", err)
			}
		}
	}
}

// TestWriterSplitCharacters: a stream cut into chunks anywhere (io.Copy
// of a recording) comes out as if written whole, in every mode; a
// character cut off at the end comes out of Flush as escaped bytes.
func TestWriterSplitCharacters(t *testing.T) {
	src := `{"o":"é\u202e👍` + "\u202e\U000e0001" + `x"}`
	for _, mode := range []Mode{ModeText, ModeJSON, ModeRaw} {
		var whole bytes.Buffer
		(&Writer{W: &whole, Mode: mode}).Write([]byte(src))
		for cut := 1; cut < len(src); cut++ {
			var b bytes.Buffer
			w := &Writer{W: &b, Mode: mode}
			w.Write([]byte(src[:cut]))
			w.Write([]byte(src[cut:]))
			w.Flush()
			if b.String() != whole.String() {
				t.Errorf("mode %d cut at %d: %q, want %q", mode, cut, b.String(), whole.String())
			}
		}
	}
	var b bytes.Buffer
	w := &Writer{W: &b}
	w.Write([]byte("a\xe2\x80"))
	if b.String() != "a" {
		t.Errorf("before Flush: %q", b.String())
	}
	w.Flush()
	if b.String() != `a\xe2\x80` {
		t.Errorf("after Flush: %q", b.String())
	}
}
