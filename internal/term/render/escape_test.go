package render

import "testing"

// TestEscapeParserEdges pins the cases where the renderer asks more of the
// escape parser (github.com/charmbracelet/x/ansi) than it does on its own:
// each would render differently with the bare parser.
func TestEscapeParserEdges(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"CR inside a private CSI keeps it private", "abc\x1b[?2\rKx", "xbc"},
		{"LF inside a CSI acts, the CSI still ends", "ab\x1b[3\nmcd", "ab\ncd"},
		{"private marker after a parameter: ignored", "ab\x1b[2?Kc", "abc"},
		{"parameter after an intermediate: ignored to the final byte", "ab\x1b[1 2Kcd", "abcd"},
		{"huge first parameter: EL does nothing", "ab\x1b[4294967298Kc", "abc"},
		{"leading zeros: EL 2", "ab\x1b[0002Kc", "c"},
		{"sub-parameters: the first counts", "ab\x1b[2:5Kc", "c"},
		{"SS3 drops the next character", "a\x1bOPb", "ab"},
		{"SS2 lets a control act", "a\x1bN\nb", "a\nb"},
		{"8-bit SS3", "a\u008fPb", "ab"},
		{"8-bit CSI", "ab\u009b2Kc", "c"},
		{"8-bit ST ends an OSC", "a\u009d0;t\u009cb", "ab"},
		{"8-bit C1 aborts a CSI", "a\x1b[1\u0085b", "ab"},
		{"non-ASCII ends a CSI and is text", "a\x1b[1é", "aé"},
		{"a character holding byte 0x9C inside an OSC", "a\x1b]0;ќ\ab", "ab"},
		{"empty DCS", "a\x1bP\x1b\\b", "ab"},
		{"ESC inside a DCS starts a new sequence", "a\x1bPq\x1b[31mb", "ab"},
		{"BEL does not end a DCS", "a\x1bPq\ab\x1b\\c", "ac"},
		{"CAN aborts an OSC", "a\x1b]0;t\x18b", "ab"},
		{"DEL inside a CSI is ignored", "a\x1b[2\x7fKb", "b"},
		{"double ESC", "a\x1b\x1b[2Kb", "b"},
		{"CHA 1 acts as CR", "abc\x1b[1Gx", "xbc"},
		{"CHA 2 does not", "abc\x1b[2Gx", "abcx"},
	} {
		if got := Text([]byte(c.in)); got != c.want {
			t.Errorf("%s: %q renders %q, want %q", c.name, c.in, got, c.want)
		}
		// Split anywhere, the same.
		for i := 1; i < len(c.in); i++ {
			var out []byte
			r := New(0, Options{})
			add := func(l Line) {
				out = append(out, l.Text...)
				if !l.Partial {
					out = append(out, '\n')
				}
			}
			r.Write([]byte(c.in[:i]), add)
			r.Write([]byte(c.in[i:]), add)
			r.Flush(add)
			if string(out) != c.want {
				t.Errorf("%s split at %d: %q, want %q", c.name, i, out, c.want)
			}
		}
	}
}
