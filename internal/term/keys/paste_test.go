package keys

import (
	"strings"
	"testing"
)

const (
	start = e + "[200~"
	end   = e + "[201~"
	off   = "bracketed paste mode is off in the program; sent raw text."
)

func TestPaste(t *testing.T) {
	tests := []struct {
		text           string
		bracketed, pty bool
		m              Modes
		want, wantWarn string
	}{
		// PTY, bracketed requested: wrapped only if the program enabled the mode.
		{"hello", true, true, bp, start + "hello" + end, ""},
		{"hello", true, true, both, start + "hello" + end, ""},
		{"hello", true, true, none, "hello", off},
		{"hello", true, true, ac, "hello", off},
		// bracketed:false: raw, no warning.
		{"hello", false, true, bp, "hello", ""},
		{"hello", false, true, none, "hello", ""},
		// Pipe sessions: raw, never a warning.
		{"hello", true, false, bp, "hello", ""},
		{"hello", true, false, none, "hello", ""},
		{"hello", false, false, none, "hello", ""},
		// The end marker is removed in every case.
		{"a" + end + "b", true, true, bp, start + "ab" + end, ""},
		{"a" + end + "b", true, true, none, "ab", off},
		{"a" + end + "b", false, false, none, "ab", ""},
		{end, true, true, bp, start + end, ""},
		{end + end + "x" + end, false, true, none, "x", ""},
		// Removal that joins a new marker removes that too.
		{e + "[20" + end + "1~", true, true, bp, start + end, ""},
		{e + "[" + e + "[20" + end + "1~201~tail", false, false, none, "tail", ""},
		{e + e + "[201~[201~", false, false, none, "", ""},
		{"x" + e + "[201~[201~", false, false, none, "x[201~", ""},
		// Other bytes are untouched, including the start marker and partial end markers.
		{start + "x", false, false, none, start + "x", ""},
		{e + "[201", false, false, none, e + "[201", ""},
		{"[201~", false, false, none, "[201~", ""},
		{"line 1\nline 2\r\n\ttabbed 日本 é", true, true, bp, start + "line 1\nline 2\r\n\ttabbed 日本 é" + end, ""},
		{"", true, true, bp, start + end, ""},
		{"", false, false, none, "", ""},
	}
	for _, tt := range tests {
		got, warn := Paste(tt.text, tt.bracketed, tt.pty, tt.m)
		if string(got) != tt.want || warn != tt.wantWarn {
			t.Errorf("Paste(%q, bracketed=%v, pty=%v, %+v) = %q, %q; want %q, %q",
				tt.text, tt.bracketed, tt.pty, tt.m, got, warn, tt.want, tt.wantWarn)
		}
	}
}

func TestPasteLarge(t *testing.T) {
	// Nested markers, deep enough that repeated ReplaceAll would be quadratic.
	const n = 100000
	text := strings.Repeat(e+"[20", n) + end + strings.Repeat("1~", n)
	got, _ := Paste(text, true, true, bp)
	if string(got) != start+end {
		t.Errorf("nested: got %d bytes", len(got))
	}
}

func FuzzPaste(f *testing.F) {
	f.Add("hello", true, true, true)
	f.Add(e+"[20"+end+"1~", true, true, true)
	f.Fuzz(func(t *testing.T, text string, bracketed, pty, mode bool) {
		got, warn := Paste(text, bracketed, pty, Modes{BracketedPaste: mode})
		body := string(got)
		wrapped := pty && bracketed && mode
		if wrapped {
			if !strings.HasPrefix(body, start) || !strings.HasSuffix(body, end) {
				t.Fatalf("not wrapped: %q", body)
			}
			body = body[len(start) : len(body)-len(end)]
		}
		if strings.Contains(body, end) {
			t.Fatalf("end marker left in %q", body)
		}
		if len(body) > len(text) {
			t.Fatalf("body grew: %q from %q", body, text)
		}
		if !strings.Contains(text, end) && body != text {
			t.Fatalf("text changed: %q from %q", body, text)
		}
		if (warn != "") != (pty && bracketed && !mode) {
			t.Fatalf("warning %q for pty=%v bracketed=%v mode=%v", warn, pty, bracketed, mode)
		}
	})
}
