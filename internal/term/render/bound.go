package render

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// boundMarker is the line that replaces what [Bound] and [CutLine] leave
// out: "[… <n> chars omitted …]".
func boundMarker(n int) string {
	return "[… " + strconv.Itoa(n) + " chars omitted …]"
}

// CutLine returns s if it has at most n code points; otherwise its start
// and its end around "[… <k> chars omitted …]", the whole at most n code
// points (at least the marker). It is for one line of text quoted in a
// result (a matched line, an echoed command).
func CutLine(s string, n int) string {
	total := utf8.RuneCountInString(s)
	if total <= n {
		return s
	}
	// The marker's length depends on k; k's digits never exceed total's.
	room := max(n-utf8.RuneCountInString(boundMarker(total)), 0)
	head := room / 2
	tail := room - head
	return headRunes(s, head) + boundMarker(total-head-tail) + tailRunes(s, tail)
}

// Bound returns text if it has at most n code points; otherwise it keeps
// the start and the end of text around the line "[… <k> chars omitted …]",
// the whole at most n code points, and reports true. The start is at most
// a quarter of what the marker leaves, and both parts end at a line
// boundary when the complete lines fill at least half of their part, by
// the rule of [Truncate]. Bound is the last guard of a result's size: it
// knows nothing of sessions, so its marker cannot say where the rest is.
func Bound(text string, n int) (string, bool) {
	total := utf8.RuneCountInString(text)
	if total <= n {
		return text, false
	}
	// Two newlines around the marker, and the marker.
	room := max(n-utf8.RuneCountInString(boundMarker(total))-2, 0)
	parts := strings.Split(text, "\n")
	lines := make([]Line, len(parts))
	for i, p := range parts {
		lines[i] = Line{Text: p}
	}
	head := CutHead(lines, room/4)
	tail := CutTail(lines, room-head.Chars, false)
	omitted := max(total-head.Chars-tail.Chars, 0)
	var b strings.Builder
	b.Grow(len(head.Text) + len(tail.Text) + 64)
	b.WriteString(head.Text)
	if head.Text != "" {
		b.WriteByte('\n')
	}
	b.WriteString(boundMarker(omitted))
	if tail.Text != "" {
		b.WriteByte('\n')
		b.WriteString(tail.Text)
	}
	return b.String(), true
}
