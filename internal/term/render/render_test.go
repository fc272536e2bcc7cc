package render

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// texts renders in with opt and returns the line texts.
func texts(in string, opt Options) []string {
	out := []string{}
	for _, l := range Lines([]byte(in), 0, opt) {
		out = append(out, l.Text)
	}
	return out
}

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		// Plain text and line splitting.
		{"empty", "", []string{}},
		{"plain", "hello", []string{"hello"}},
		{"lines", "a\nb\n", []string{"a", "b"}},
		{"empty lines", "\n\na\n\n", []string{"", "", "a", ""}},
		{"tab kept", "a\tb", []string{"a\tb"}},

		// CSI.
		{"sgr", "\x1b[31mred\x1b[0m plain", []string{"red plain"}},
		{"sgr reset short", "\x1b[1;38;5;196mX\x1b[m", []string{"X"}},
		{"sgr colon", "\x1b[38:2:255:0:0mA\x1b[0m", []string{"A"}},
		{"private", "\x1b[?2004hprompt$ \x1b[?2004l", []string{"prompt$ "}},
		{"private gt", "\x1b[>4;2mA\x1b[=1cB", []string{"AB"}},
		{"intermediate", "\x1b[2 qA\x1b[!pB", []string{"AB"}},
		{"cursor moves", "\x1b[2J\x1b[H\x1b[10;5Hx\x1b[3A\x1b[2Cy\x1b[6n", []string{"xy"}},
		{"malformed csi", "\x1b[1?2mA\x1b[1 2mB", []string{"AB"}},
		{"csi del ignored", "\x1b[3\x7f1mA", []string{"A"}},
		{"csi lf executes", "\x1b[3\n1mX", []string{"", "X"}},
		{"csi cr executes", "abc\x1b[3\r1mX", []string{"Xbc"}},
		{"csi can aborts", "\x1b[31\x18mX", []string{"mX"}},
		{"csi sub aborts", "\x1b[31\x1amX", []string{"mX"}},
		{"csi esc restarts", "\x1b[31\x1b[32mX", []string{"X"}},
		{"csi non-ascii ends", "\x1b[31éX", []string{"éX"}},

		// OSC.
		{"osc title bel", "\x1b]0;my title\x07text", []string{"text"}},
		{"osc title st", "\x1b]2;my title\x1b\\text", []string{"text"}},
		{"osc utf8 title", "\x1b]2;tïtle ✓\x07text", []string{"text"}},
		{"osc8 st", "see \x1b]8;;https://example.com/a?b=c\x1b\\the link\x1b]8;;\x1b\\ now", []string{"see the link now"}},
		{"osc8 bel", "\x1b]8;id=1;http://x.y\x07link\x1b]8;;\x07!", []string{"link!"}},
		{"osc swallows lf", "a\x1b]0;x\ny\x07b\nc", []string{"ab", "c"}},
		{"osc ended by other esc", "\x1b]0;title\x1b[31mX", []string{"X"}},
		{"osc esc esc", "\x1b]0;t\x1b\x1b[31mX", []string{"X"}},
		{"osc can", "\x1b]0;title\x18X", []string{"X"}},
		{"osc 52", "\x1b]52;c;aGVsbG8=\x07ok", []string{"ok"}},

		// DCS, SOS, PM, APC.
		{"dcs sixel", "a\x1bPq#0;2;0;0;0#0~~@@$-\x1b\\b", []string{"ab"}},
		{"dcs bel not end", "a\x1bP1$r\x07x\x1b\\b", []string{"ab"}},
		{"sos pm apc", "a\x1bXsos\x1b\\b\x1b^pm\x1b\\c\x1b_Gapc\x1b\\d", []string{"abcd"}},
		{"dcs c1 st", "a\x1bPdata\u009cb", []string{"ab"}},

		// SS2, SS3.
		{"ss2 ss3", "a\x1bNxb\x1bOyc", []string{"abc"}},
		{"ss3 arrow", "\x1bOA\x1bOBz", []string{"z"}},
		{"ss3 non-ascii", "\x1bOéz", []string{"z"}},
		{"ss3 then lf", "a\x1bO\nb", []string{"a", "b"}},

		// Two-byte and nF ESC sequences.
		{"esc 7 8", "\x1b7a\x1b8b", []string{"ab"}},
		{"esc keypad", "\x1b=a\x1b>b", []string{"ab"}},
		{"charset", "\x1b(Ba\x1b)0b\x1b(0c\x1b%Gd", []string{"abcd"}},
		{"decaln", "\x1b#8a", []string{"a"}},
		{"ris ind ri", "\x1bca\x1bDb\x1bMc\x1bEd", []string{"abcd"}},
		{"esc backslash", "a\x1b\\b", []string{"ab"}},
		{"esc esc", "\x1b\x1b[31mX", []string{"X"}},
		{"esc non-ascii", "\x1bé", []string{"é"}},
		{"esc lf", "a\x1b\nb", []string{"a"}}, // LF executes, "b" ends ESC b
		{"trailing esc", "a\x1b", []string{"a"}},
		{"trailing csi", "a\x1b[3", []string{"a"}},

		// C1 as code points.
		{"c1 csi", "a\u009b31mb", []string{"ab"}},
		{"c1 osc", "a\u009d0;title\u009cb\u009dt\x07c", []string{"abc"}},
		{"c1 others", "a\u0085b\u0084c\u009cd", []string{"abcd"}},
		{"c1 dcs apc", "a\u0090dcs\u009cb\u009fapc\u009cc", []string{"abc"}},
		{"c1 ss3", "a\u008fxb", []string{"ab"}},
		{"8-bit bytes are not c1", "a\x9b31mb", []string{"a\ufffd31mb"}},

		// C0 and BS.
		{"c0 dropped", "a\x00b\x01c\x7fd\x07e\x0bf\x0cg", []string{"abcdefg"}},
		{"bs", "abc\b\bd", []string{"ad"}},
		{"bs too many", "a\b\b\bb", []string{"b"}},
		{"bs multibyte", "é✓\bx", []string{"éx"}},
		{"bs overstrike", "_\bU_\bL", []string{"UL"}},
		{"bs bold", "B\bBo\bo", []string{"Bo"}},
		{"bs after cr", "abc\r\bX", []string{"Xbc"}},

		// Progress collapse.
		{"cr overwrite", "abc\rX", []string{"Xbc"}},
		{"cr percent", "50%\r100%", []string{"100%"}},
		{"cr longer", "ab\rwxyz", []string{"wxyz"}},
		{"crlf", "a\r\nb\r\n", []string{"a", "b"}},
		{"trailing cr", "abc\r", []string{"abc"}},
		{"cr cr lf", "a\r\r\nb", []string{"a", "b"}},
		{"cr escape lf", "done\r\x1b[0m\n", []string{"done"}},
		{"lone crlf", "\r\n", []string{""}},
		{"cr multibyte", "ééé\rab", []string{"abé"}},
		{"cr wide over ascii", "abc\r✓", []string{"✓bc"}},
		{"cr twice", "aaaa\rbb\rc", []string{"cbaa"}},
		{"cr bs", "abcd\rxy\bz", []string{"xzcd"}},
		{"cr bs to start", "abcdef\rxyz\b\b\bQ", []string{"Qyzdef"}},
		{"cr bs then end", "ab\rabc\b\bX", []string{"aX"}},
		{"el after cr", "50%\r\x1b[K7%", []string{"7%"}},
		{"el0 mid", "abcdef\rab\x1b[K", []string{"ab"}},
		{"el0 explicit", "abcdef\rab\x1b[0K", []string{"ab"}},
		{"el1", "abcdef\rab\x1b[1Kx", []string{"xdef"}},
		{"el2", "abc\x1b[2Kd", []string{"d"}},
		{"el erases trailing", "done\r\x1b[K\n", []string{""}},
		{"el private ignored", "abc\r\x1b[?Kx", []string{"xbc"}},
		{"cha 1", "abc\x1b[1Gxy", []string{"xyc"}},
		{"cha default", "abc\x1b[Gx", []string{"xbc"}},
		{"cha 0", "abc\x1b[0Gx", []string{"xbc"}},
		{"cha other ignored", "abc\x1b[5Gx", []string{"abcx"}},
		{"spinner", "⠋ Loading\x1b[2K\x1b[1G⠙ Loading\x1b[2K\x1b[1G✔ Done\n", []string{"✔ Done"}},

		// Step 1.
		{"cf removed", "a\u200bb\ufeffc\u202ed\u2066e\u00adf", []string{"abcdef"}},
		{"cf inside csi", "\x1b[3\u200b1mX", []string{"X"}},
		{"invalid byte", "a\xffb", []string{"a\ufffdb"}},
		{"truncated seq", "a\xe2\x82", []string{"a\ufffd\ufffd"}},
		{"truncated seq then ascii", "\xe2\x82a", []string{"\ufffd\ufffda"}},
		{"surrogate", "\xed\xa0\x80", []string{"\ufffd\ufffd\ufffd"}},
		{"overlong", "\xc0\xaf", []string{"\ufffd\ufffd"}},
		{"valid", "héllo wörld ✓ 😀", []string{"héllo wörld ✓ 😀"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := texts(tt.in, Options{})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("render %q\n got %q\nwant %q", tt.in, got, tt.want)
			}
			checkStreaming(t, []byte(tt.in), Options{})
			checkStreaming(t, []byte(tt.in), Options{MaxLineBytes: 5})
		})
	}
}

func TestRaw(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"\x1b[31mred\x1b[0m\r\n", []string{"\x1b[31mred\x1b[0m\r"}},
		{"a\rb\bc\x00", []string{"a\rb\bc\x00"}},
		{"a\u200bb\u009bc", []string{"ab\u009bc"}},
		{"\xffa\xe2\x82", []string{"\ufffda\ufffd\ufffd"}},
		{"a\n\nb", []string{"a", "", "b"}},
	}
	for _, tt := range tests {
		got := texts(tt.in, Options{Raw: true})
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("raw %q\n got %q\nwant %q", tt.in, got, tt.want)
		}
		checkStreaming(t, []byte(tt.in), Options{Raw: true})
	}
}

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a", "a"},
		{"a\n", "a\n"},
		{"a\nb", "a\nb"},
		{"a\n\x1b[0m", "a\n"},
		{"a\n\n", "a\n\n"},
		{"\x1b[1mbold\x1b[0m\r\n", "bold\n"},
	}
	for _, tt := range tests {
		if got := Text([]byte(tt.in)); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFlushReuse(t *testing.T) {
	var got []Line
	add := func(l Line) { got = append(got, l) }
	r := New(10, Options{})
	r.Write([]byte("ab\x1b[3"), add)
	r.Flush(add)
	r.Write([]byte("1mc\n\x1b[0m"), add) // a fresh parser: "1mc" is text
	r.Flush(add)
	r.Flush(add)
	want := []Line{
		{Cursor: 10, End: 15, Text: "ab", Partial: true},
		{Cursor: 15, End: 19, Text: "1mc"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestCursors(t *testing.T) {
	raw := []byte("ab\ncd\r\n\x1b[31mef\x1b[0m\n\xc3\xa9\rZ\ntail")
	const start = 1000
	lines := Lines(raw, start, Options{})
	want := []Line{
		{Cursor: 1000, End: 1003, Text: "ab"},
		{Cursor: 1003, End: 1007, Text: "cd"},
		{Cursor: 1007, End: 1019, Text: "ef"},
		{Cursor: 1019, End: 1024, Text: "Z"},
		{Cursor: 1024, End: 1028, Text: "tail", Partial: true},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("got  %+v\nwant %+v", lines, want)
	}
	for _, l := range lines {
		src := raw[l.Cursor-start : l.End-start]
		if l.Text != "Z" && !bytes.Contains(src, []byte(l.Text)) {
			t.Errorf("raw[%d:%d] = %q does not hold %q", l.Cursor, l.End, src, l.Text)
		}
		if got := Text(src); strings.TrimSuffix(got, "\n") != l.Text {
			t.Errorf("Text(raw[%d:%d]) = %q, want %q", l.Cursor, l.End, got, l.Text)
		}
	}
}

func TestMaxLineBytes(t *testing.T) {
	raw := "abcdefghij\nabcd\nab✓cd\n"
	lines := Lines([]byte(raw), 0, Options{MaxLineBytes: 4})
	want := []Line{
		{Cursor: 0, End: 4, Text: "abcd"},
		{Cursor: 4, End: 8, Text: "efgh"},
		{Cursor: 8, End: 11, Text: "ij"},
		{Cursor: 11, End: 16, Text: "abcd"},
		{Cursor: 16, End: 18, Text: "ab"},
		{Cursor: 18, End: 22, Text: "✓c"}, // ✓ did not fit after "ab"
		{Cursor: 22, End: 24, Text: "d"},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("got  %+v\nwant %+v", lines, want)
	}
	// A default-sized Renderer fed a 3 MiB line breaks it at 1 MiB.
	big := bytes.Repeat([]byte("x"), 3*DefaultMaxLineBytes+5)
	lines = Lines(big, 0, Options{})
	if len(lines) != 4 || len(lines[0].Text) != DefaultMaxLineBytes || lines[3].Text != "xxxxx" {
		t.Fatalf("got %d lines", len(lines))
	}
}

// checkStreaming checks that rendering in split in two at each point, and
// byte by byte, gives the same lines as one Write.
func checkStreaming(t *testing.T, in []byte, opt Options) {
	t.Helper()
	want := Lines(in, 7, opt)
	render := func(chunks [][]byte) []Line {
		var got []Line
		add := func(l Line) { got = append(got, l) }
		r := New(7, opt)
		for _, c := range chunks {
			r.Write(c, add)
		}
		r.Flush(add)
		return got
	}
	// Every split point of short inputs; about 300 spread over long ones.
	stride := max(1, len(in)/300)
	for i := 0; i <= len(in); i += stride {
		got := render([][]byte{in[:i], in[i:]})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d of %q:\n got %+v\nwant %+v", i, in, got, want)
		}
	}
	// Byte by byte, with empty writes in between.
	var chunks [][]byte
	for i := range in {
		chunks = append(chunks, in[i:i+1], nil)
	}
	if got := render(chunks); !reflect.DeepEqual(got, want) {
		t.Fatalf("byte by byte %q:\n got %+v\nwant %+v", in, got, want)
	}
}

// alphabet holds fragments that exercise the parser's corners.
var alphabet = []string{
	"a", "b", "Z", " ", "1", "3", ";", "?", "[", "]", "\\", "m", "K", "G", "P", "X", "N", "O",
	"\x1b", "\x1b[", "\x1b]", "\x1b\\", "\x07", "\r", "\n", "\r\n", "\b", "\t", "\x00", "\x18", "\x7f",
	"é", "✓", "😀", "\xc3", "\xa9", "\xe2", "\x9c", "\x80", "\xff", "\xf0\x9f",
	"\u009b", "\u009c", "\u009d", "\u0090", "\u008f", "\u200b", "\ufeff",
	"\x1b[31m", "\x1b[0m", "\x1b[K", "\x1b[2K", "\x1b[1G", "\x1b]0;t\x07", "\x1b]8;;u\x1b\\",
}

func randomInput(rng *rand.Rand, n int) []byte {
	var b []byte
	for range n {
		b = append(b, alphabet[rng.IntN(len(alphabet))]...)
	}
	return b
}

func TestStreamingEquivalence(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 400
	if testing.Short() {
		n = 50
	}
	for range n {
		in := randomInput(rng, 1+rng.IntN(24))
		for _, opt := range []Options{{}, {Raw: true}, {MaxLineBytes: 6}, {Resync: true}, {Raw: true, Resync: true, MaxLineBytes: 4}} {
			checkStreaming(t, in, opt)
			checkInvariants(t, in, Lines(in, 7, opt), 7, opt)
		}
	}
	// Random chunkings of a larger input.
	for range 50 {
		in := randomInput(rng, 2000)
		want := Lines(in, 0, Options{MaxLineBytes: 64})
		var got []Line
		add := func(l Line) { got = append(got, l) }
		r := New(0, Options{MaxLineBytes: 64})
		for rest := in; len(rest) > 0; {
			k := min(rng.IntN(40), len(rest))
			r.Write(rest[:k], add)
			rest = rest[k:]
		}
		r.Flush(add)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("random chunks differ for %q", in)
		}
	}
}

// checkInvariants checks the properties every rendering has.
func checkInvariants(t *testing.T, in []byte, lines []Line, start int64, opt Options) {
	t.Helper()
	next := start
	for i, l := range lines {
		if l.Cursor != next {
			t.Fatalf("%q: line %d Cursor %d, want %d", in, i, l.Cursor, next)
		}
		if l.End < l.Cursor || l.End > start+int64(len(in)) {
			t.Fatalf("%q: line %d End %d out of range", in, i, l.End)
		}
		if l.Partial && (i != len(lines)-1 || l.End != start+int64(len(in))) {
			t.Fatalf("%q: partial line %d is not last or does not end the input", in, i)
		}
		next = l.End
		if !utf8.ValidString(l.Text) {
			t.Fatalf("%q: line %d %q not valid UTF-8", in, i, l.Text)
		}
		maxLine := opt.MaxLineBytes
		if maxLine <= 0 {
			maxLine = DefaultMaxLineBytes
		}
		maxLine = max(maxLine, 4)
		if len(l.Text) > maxLine {
			t.Fatalf("%q: line %d has %d bytes", in, i, len(l.Text))
		}
		for _, c := range l.Text {
			if c == '\n' || unicode.Is(unicode.Cf, c) {
				t.Fatalf("%q: line %d %q holds %U", in, i, l.Text, c)
			}
			if !opt.Raw && (c < 0x20 && c != '\t' || c >= 0x7f && c <= 0x9f) {
				t.Fatalf("%q: line %d %q holds control %U", in, i, l.Text, c)
			}
		}
	}
}

func FuzzRenderer(f *testing.F) {
	f.Add([]byte("\x1b[31mred\x1b[0m\r\n50%\r100%\n"), uint8(3), uint8(0))
	f.Add([]byte("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"), uint8(9), uint8(2))
	f.Add([]byte("\xe2\x9c\x93\u200b\x1bPq\x1b\\\x1bOA"), uint8(1), uint8(1))
	f.Add([]byte("a\u009b31mb\u009d0;t\u009cc\nabc\rX\b\x1b[K\n"), uint8(2), uint8(4))
	f.Fuzz(func(t *testing.T, in []byte, split, flags uint8) {
		opt := Options{Raw: flags&1 != 0, Resync: flags&2 != 0}
		if flags&4 != 0 {
			opt.MaxLineBytes = 8
		}
		want := Lines(in, 0, opt)
		checkInvariants(t, in, want, 0, opt)
		// Stream in chunks of varying size derived from split.
		var got []Line
		add := func(l Line) { got = append(got, l) }
		r := New(0, opt)
		step := int(split%16) + 1
		for i := 0; i < len(in); {
			k := min(step, len(in)-i)
			r.Write(in[i:i+k], add)
			i += k
			step = step*7%16 + 1
		}
		r.Flush(add)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("streaming differs for %q:\n got %+v\nwant %+v", in, got, want)
		}
		if !opt.Raw {
			for _, l := range want {
				if strings.IndexByte(l.Text, 0x1b) >= 0 {
					t.Fatalf("ESC left in %q", l.Text)
				}
			}
		}
		// Priming with the bytes before a start point renders every line
		// after the first one exactly as rendering from the beginning.
		if opt.Resync || opt.MaxLineBytes != 0 || len(in) == 0 {
			return
		}
		s := int(split) % len(in)
		var primed []Line
		r = New(int64(s), opt)
		r.Prime(in[:s])
		r.Write(in[s:], func(l Line) { primed = append(primed, l) })
		r.Flush(func(l Line) { primed = append(primed, l) })
		if len(primed) < 2 {
			return
		}
		i := 0
		for i < len(want) && want[i].Cursor < primed[0].End {
			i++
		}
		if !reflect.DeepEqual(primed[1:], want[i:]) {
			t.Fatalf("primed at %d differs for %q:\n got %+v\nwant %+v", s, in, primed[1:], want[i:])
		}
	})
}

func TestResync(t *testing.T) {
	raw := []byte("\x1b[1;31mhello\x1b[0m wörld\nnext\n")
	// Every start inside the first escape sequence but on its final byte
	// (a lone "m" is text) resynchronises to "hello".
	for s := 1; s < len("\x1b[1;31m")-1; s++ {
		lines := Lines(raw[s:], int64(s), Options{Resync: true})
		if len(lines) != 2 || lines[0].Text != "hello wörld" || lines[0].Cursor != int64(s) {
			t.Errorf("start %d (%q): got %+v", s, raw[s:s+3], lines)
		}
		checkStreaming(t, raw[s:], Options{Resync: true})
	}
	// Starting inside "ö" skips its continuation byte.
	s := bytes.IndexRune(raw, 'ö') + 1
	lines := Lines(raw[s:], int64(s), Options{Resync: true})
	if lines[0].Text != "rld" || lines[0].Cursor != int64(s) || lines[0].End != int64(bytes.IndexByte(raw, '\n')+1) {
		t.Errorf("inside ö: got %+v", lines)
	}
	// Without Resync the continuation byte is invalid.
	if got := texts(string(raw[s:]), Options{}); got[0] != "\ufffdrld" {
		t.Errorf("inside ö without Resync: got %q", got)
	}

	tests := []struct{ in, want string }{
		{"\x9f\x98\x80ok", "ok"},                               // inside 😀
		{"[?2004hok", "ok"},                                    // after ESC
		{"?25lok", "ok"},                                       // after ESC [
		{"0mok", "ok"},                                         // inside ESC [ 0 m
		{"Kok", "Kok"},                                         // a bare letter stays
		{"31mok", "ok"},                                        // inside SGR
		{"my title\x07ok", "ok"},                               // inside an OSC
		{"://example.com\x1b\\link", "link"},                   // inside OSC 8
		{"q#0;2;0;0;0#0~~@@\x1b\\ok", "ok"},                    // inside DCS
		{"text \x1b]0;t\x07ok", "text ok"},                     // a complete OSC later
		{"5 files\x1b[0m", "5 files"},                          // digits are text
		{"[INFO] started", "[INFO] started"},                   // brackets are text
		{"[1] done", "[1] done"},                               // brackets are text
		{"2nd try", "2nd try"},                                 // ordinary word
		{"a\nb\x07c", "a"},                                     // BEL after LF: not a tail
		{"plain" + strings.Repeat("x", 600) + "\x07", "plain"}, // beyond the window
	}
	for _, tt := range tests {
		got := texts(tt.in, Options{Resync: true})
		if len(got) == 0 || !strings.HasPrefix(got[0], tt.want) {
			t.Errorf("Resync %q: got %q, want prefix %q", tt.in, got, tt.want)
		}
		checkStreaming(t, []byte(tt.in), Options{Resync: true})
	}
	// Raw mode only resynchronises UTF-8.
	if got := texts("\xa9[31mx", Options{Raw: true, Resync: true}); got[0] != "[31mx" {
		t.Errorf("raw resync: got %q", got)
	}
}

func TestPrime(t *testing.T) {
	raw := []byte("x\x1b]0;a title\x07\x1b[1;31mhé\x1b[0m wörld\x1b]8;;http://u\x1b\\link\x1b]8;;\x1b\\\nnext\n")
	full := Lines(raw, 0, Options{})
	for s := 1; s < int(full[0].End); s++ {
		r := New(int64(s), Options{Resync: true})
		r.Prime(raw[max(0, s-64):s])
		var got []Line
		add := func(l Line) { got = append(got, l) }
		r.Write(raw[s:], add)
		r.Flush(add)
		// The rendering from s is a suffix of the full line's text, and the
		// second line is identical.
		if len(got) == 0 || got[len(got)-1] != full[len(full)-1] {
			t.Fatalf("start %d: got %+v", s, got)
		}
		if len(got) == 2 {
			if got[0].Cursor != int64(s) || got[0].End != full[0].End || !strings.HasSuffix(full[0].Text, got[0].Text) {
				t.Fatalf("start %d: first line %+v not a suffix of %+v", s, got[0], full[0])
			}
			if strings.ContainsAny(got[0].Text, "\ufffd[]") {
				t.Fatalf("start %d: first line %q has garbage", s, got[0].Text)
			}
		}
	}
}

// TestRealTools renders the coloured output of real tools and compares it
// with their plain output.
func TestRealTools(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"alpha.txt", "beta.sh", "gamma"} {
		mode := os.FileMode(0o644)
		if name == "beta.sh" {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("one match\ntwo\nthree match\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("alpha.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) []string {
		return append([]string{"git", "-C", dir, "-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)
	}
	type run struct {
		name         string
		setup        [][]string
		color, plain []string
	}
	runs := []run{
		{name: "ls", color: []string{"ls", "-l", "--color=always", dir}, plain: []string{"ls", "-l", "--color=never", dir}},
		{name: "grep", color: []string{"grep", "-n", "--color=always", "match", filepath.Join(dir, "alpha.txt")},
			plain: []string{"grep", "-n", "--color=never", "match", filepath.Join(dir, "alpha.txt")}},
		{name: "git", setup: [][]string{git("init", "-q"), git("add", "."), git("commit", "-q", "-m", "first"), git("tag", "v1")},
			color: git("log", "--color=always", "--decorate", "--stat"), plain: git("log", "--no-color", "--decorate", "--stat")},
		{name: "git diff", setup: [][]string{{"sh", "-c", "echo changed >> " + filepath.Join(dir, "gamma")}},
			color: git("diff", "--color=always"), plain: git("diff", "--no-color")},
	}
	for _, rn := range runs {
		t.Run(rn.name, func(t *testing.T) {
			if _, err := exec.LookPath(rn.color[0]); err != nil {
				t.Skipf("%s not installed", rn.color[0])
			}
			for _, s := range rn.setup {
				if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
					t.Skipf("%v: %v %s", s, err, out)
				}
			}
			cmd := exec.Command(rn.color[0], rn.color[1:]...)
			cmd.Env = append(os.Environ(), "LS_COLORS=di=01;34:ln=01;36:ex=01;32:*.txt=00;33", "TZ=UTC", "LC_ALL=C")
			color, err := cmd.Output()
			if err != nil {
				t.Skipf("%v: %v", rn.color, err)
			}
			cmd = exec.Command(rn.plain[0], rn.plain[1:]...)
			cmd.Env = append(os.Environ(), "TZ=UTC", "LC_ALL=C")
			plain, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %v", rn.plain, err)
			}
			if !bytes.Contains(color, []byte("\x1b[")) || bytes.IndexByte(plain, 0x1b) >= 0 {
				t.Fatalf("colour output %q or plain output %q is not what the test needs", color, plain)
			}
			if got := Text(color); got != Text(plain) {
				t.Errorf("rendered colour output differs:\n got %q\nwant %q", got, plain)
			}
		})
	}
}

func TestProgress(t *testing.T) {
	var pip strings.Builder
	for i := 0; i <= 40; i++ {
		fmt.Fprintf(&pip, "\r\x1b[2K   \x1b[38;5;197m%s\x1b[0m\x1b[38;5;237m%s\x1b[0m %d.%d/4.0 MB \x1b[31m1.2 MB/s\x1b[0m eta \x1b[36m0:00:%02d\x1b[0m",
			strings.Repeat("━", i), strings.Repeat("╺", 40-i), i/10, i%10, 40-i)
	}
	pip.WriteString("\r\x1b[2K   \x1b[38;5;70m" + strings.Repeat("━", 40) + "\x1b[0m 4.0/4.0 MB \x1b[31m1.2 MB/s\x1b[0m eta \x1b[36m0:00:00\x1b[0m\n")
	pip.WriteString("Successfully installed requests-2.32.3\n")

	var npm strings.Builder
	for _, f := range []string{"⠋", "⠙", "⠹", "⠸", "⠼"} {
		fmt.Fprintf(&npm, "\x1b[1G%s \x1b[90mreify:lodash: timing reifyNode\x1b[0m\x1b[K", f)
	}
	npm.WriteString("\x1b[1G\x1b[0K\nadded 1 package in 2s\n")

	var curl strings.Builder
	curl.WriteString("  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\r\n")
	curl.WriteString("                                 Dload  Upload   Total   Spent    Left  Speed\r\n")
	for _, p := range []string{"  0", " 42", "100"} {
		fmt.Fprintf(&curl, "\r%s 1024k  %s 1024k    0     0   512k      0  0:00:02  0:00:01  0:00:01  512k", p, p)
	}
	curl.WriteString("\n")

	var wget strings.Builder
	for i := 0; i <= 100; i += 25 {
		fmt.Fprintf(&wget, "\rfile.tar.gz   %3d%%[%-20s]   1.00M  --.-KB/s    ", i, strings.Repeat("=", i/5))
	}
	wget.WriteString("\rfile.tar.gz   100%[====================>]   1.00M  3.2MB/s    in 0.3s    \n")

	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"pip", pip.String(), []string{"   " + strings.Repeat("━", 40) + " 4.0/4.0 MB 1.2 MB/s eta 0:00:00", "Successfully installed requests-2.32.3"}},
		{"npm", npm.String(), []string{"", "added 1 package in 2s"}},
		{"curl", curl.String(), []string{
			"  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current",
			"                                 Dload  Upload   Total   Spent    Left  Speed",
			"100 1024k  100 1024k    0     0   512k      0  0:00:02  0:00:01  0:00:01  512k"}},
		{"wget", wget.String(), []string{"file.tar.gz   100%[====================>]   1.00M  3.2MB/s    in 0.3s    "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := texts(tt.in, Options{}); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			checkStreaming(t, []byte(tt.in), Options{MaxLineBytes: 100})
		})
	}
}
