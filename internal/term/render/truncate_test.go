package render

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFold(t *testing.T) {
	tests := []struct{ in, want []string }{
		{nil, []string{}},
		{[]string{"a"}, []string{"a"}},
		{[]string{"a", "a"}, []string{"a", "a"}},
		{[]string{"a", "a", "a"}, []string{"a", "[previous line repeated 2 times]"}},
		{[]string{"a", "a", "a", "b", "b", "c", "c", "c", "c", "a"},
			[]string{"a", "[previous line repeated 2 times]", "b", "b", "c", "[previous line repeated 3 times]", "a"}},
		{[]string{"", "", "", ""}, []string{"", "[previous line repeated 3 times]"}},
	}
	for _, tt := range tests {
		if got := Fold(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Fold(%q) = %q, want %q", tt.in, got, tt.want)
		}
		// The streaming Folder agrees.
		var f Folder
		got := []string{}
		add := func(l Line) { got = append(got, l.Text) }
		for _, s := range tt.in {
			f.Add(Line{Text: s}, add)
		}
		f.Flush(add)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Folder(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFolderCursors(t *testing.T) {
	raw := []byte("x\nrep\nrep\nrep\nrep\ny\ny\nz")
	var f Folder
	var got []Line
	add := func(l Line) { got = append(got, l) }
	r := New(100, Options{})
	fold := func(l Line) { f.Add(l, add) }
	r.Write(raw, fold)
	r.Flush(fold)
	f.Flush(add)
	want := []Line{
		{Cursor: 100, End: 102, Text: "x"},
		{Cursor: 102, End: 106, Text: "rep"},
		{Cursor: 106, End: 118, Text: "[previous line repeated 3 times]"},
		{Cursor: 118, End: 120, Text: "y"},
		{Cursor: 120, End: 122, Text: "y"},
		{Cursor: 122, End: 123, Text: "z", Partial: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func mkLines(texts ...string) []Line {
	var lines []Line
	var c int64
	for _, s := range texts {
		lines = append(lines, Line{Cursor: c, End: c + int64(len(s)) + 1, Text: s})
		c += int64(len(s)) + 1
	}
	return lines
}

func TestTruncate(t *testing.T) {
	lines := mkLines("aaaa", "bbbb", "cccc", "dddd", "eeee", "ffff") // 29 chars joined
	tests := []struct {
		max  int
		want Excerpt
	}{
		{0, Excerpt{Text: "aaaa\nbbbb\ncccc\ndddd\neeee\nffff", Chars: 29}},
		{29, Excerpt{Text: "aaaa\nbbbb\ncccc\ndddd\neeee\nffff", Chars: 29}},
		{1000, Excerpt{Text: "aaaa\nbbbb\ncccc\ndddd\neeee\nffff", Chars: 29}},
		{20, Excerpt{ // head "aaaa" (whole lines), tail "\ndddd\neeee\nffff"
			Text:  "aaaa\n[… 10 chars omitted; full output: process log sessionId=s1 since=5 …]\ndddd\neeee\nffff",
			Chars: 29, Truncated: true, OmittedChars: 10, OmitCursor: 5}},
		{16, Excerpt{ // head "aaaa", tail "\neeee\nffff" (whole lines, not "dd…")
			Text:  "aaaa\n[… 15 chars omitted; full output: process log sessionId=s1 since=5 …]\neeee\nffff",
			Chars: 29, Truncated: true, OmittedChars: 15, OmitCursor: 5}},
		{28, Excerpt{ // head "aaaa" (not "aaaa\nbb"), tail from "cccc"
			Text:  "aaaa\n[… 5 chars omitted; full output: process log sessionId=s1 since=5 …]\ncccc\ndddd\neeee\nffff",
			Chars: 29, Truncated: true, OmittedChars: 5, OmitCursor: 5}},
		{8, Excerpt{ // head cut inside the first line, tail whole lines
			Text:  "aa\n[… 22 chars omitted; full output: process log sessionId=s1 since=0 …]\nffff",
			Chars: 29, Truncated: true, OmittedChars: 22, OmitCursor: 0}},
		{3, Excerpt{ // head "", tail "fff"
			Text:  "[… 26 chars omitted; full output: process log sessionId=s1 since=0 …]\nfff",
			Chars: 29, Truncated: true, OmittedChars: 26, OmitCursor: 0}},
	}
	for _, tt := range tests {
		if got := Truncate(lines, tt.max, "s1"); got != tt.want {
			t.Errorf("Truncate(max %d):\n got %+v\nwant %+v", tt.max, got, tt.want)
		}
	}
	// One line without a newline: head and tail are cut inside it.
	got := Truncate(mkLines("abcdefghijklmnopqrstuvwxyz"), 8, "x")
	if got.Text != "ab\n[… 18 chars omitted; full output: process log sessionId=x since=0 …]\nuvwxyz" {
		t.Errorf("one line: %+v", got)
	}
	// Multi-byte characters count once.
	got = Truncate(mkLines("ééééé", "✓✓✓✓✓"), 8, "x")
	if got.Text != "éé\n[… 3 chars omitted; full output: process log sessionId=x since=0 …]\n✓✓✓✓✓" || got.Chars != 11 {
		t.Errorf("multi-byte: %+v", got)
	}
}

// naiveTruncate is the definition of Truncate on a joined string.
func naiveTruncate(lines []Line, maxChars int, id string) Excerpt {
	var texts []string
	for _, l := range lines {
		texts = append(texts, l.Text)
	}
	joined := []rune(strings.Join(texts, "\n"))
	total := len(joined)
	if total <= maxChars {
		return Excerpt{Text: string(joined), Chars: total}
	}
	hm := maxChars / 4
	// Head: up to the last newline at or before code point hm if that
	// keeps at least half of hm (and something), else hm code points.
	h := hm
	for k := min(hm, total-1); k > 0; k-- {
		if joined[k] == '\n' {
			if 2*k >= hm {
				h = k
			}
			break
		}
	}
	n := maxChars - h
	// Tail: from the first newline j with total−j ≤ n if total−j ≥ n/2,
	// else the last n code points.
	t := n
	for j := total - n; j < total; j++ {
		if joined[j] == '\n' {
			if 2*(total-j) >= n {
				t = total - j
			}
			break
		}
	}
	head, tail := string(joined[:h]), string(joined[total-t:])
	// The line holding code point h, a separator belonging to the line
	// after it.
	var cursor int64
	pos := 0
	for i, l := range lines {
		n := utf8.RuneCountInString(l.Text)
		if i > 0 {
			n++
		}
		if h < pos+n {
			cursor = l.Cursor
			break
		}
		pos += n
	}
	text := head
	if head != "" && !strings.HasSuffix(head, "\n") {
		text += "\n"
	}
	omitted := total - h - t
	text += OmitMarker(omitted, id, cursor)
	if !strings.HasPrefix(tail, "\n") {
		text += "\n"
	}
	return Excerpt{Text: text + tail, Chars: total, Truncated: true, OmittedChars: omitted, OmitCursor: cursor}
}

func TestTruncateRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"", "a", "bb", "ééé", "✓", "line of text", "\t"}
	for range 2000 {
		var texts []string
		for range rng.IntN(12) {
			texts = append(texts, words[rng.IntN(len(words))]+words[rng.IntN(len(words))])
		}
		lines := mkLines(texts...)
		m := 1 + rng.IntN(60)
		want := naiveTruncate(lines, m, "id")
		if got := Truncate(lines, m, "id"); got != want {
			t.Fatalf("Truncate(%q, %d):\n got %+v\nwant %+v", texts, m, got, want)
		}
	}
}

// TestHeadTailLarge streams a large output through a Renderer into a
// HeadTail and compares with Truncate on all the lines.
func TestHeadTailLarge(t *testing.T) {
	size := 50 << 20
	if testing.Short() || raceEnabled {
		size = 8 << 20
	}
	rng := rand.New(rand.NewPCG(5, 6))
	raw := make([]byte, 0, size+1000)
	for i := 0; len(raw) < size; i++ {
		switch rng.IntN(8) {
		case 0:
			raw = fmt.Appendf(raw, "\x1b[32mok\x1b[0m %d ✓ héllo\r\n", i)
		case 1:
			raw = fmt.Appendf(raw, "%3d%%\r%3d%%\r100%%\n", i%100, (i+7)%100)
		case 2:
			raw = append(raw, "\n"...)
		default:
			raw = fmt.Appendf(raw, "line %d %s\n", i, strings.Repeat("x", rng.IntN(150)))
		}
	}
	raw = append(raw, "tail without newline ✓"...)

	const maxChars = 200000
	h := NewHeadTail(maxChars)
	r := New(0, Options{})
	add := func(l Line) { h.Add(l) }
	maxRing := 0
	for rest := raw; len(rest) > 0; {
		k := min(1+rng.IntN(64<<10), len(rest))
		r.Write(rest[:k], add)
		rest = rest[k:]
		maxRing = max(maxRing, h.ringChars)
	}
	r.Flush(add)
	got := h.Excerpt("big")

	all := Lines(raw, 0, Options{})
	want := Truncate(all, maxChars, "big")
	if got != want {
		t.Fatalf("HeadTail differs from Truncate: %d/%d chars, omitted %d/%d, cursor %d/%d",
			got.Chars, want.Chars, got.OmittedChars, want.OmittedChars, got.OmitCursor, want.OmitCursor)
	}
	if !got.Truncated || utf8.RuneCountInString(got.Text) > maxChars+100 {
		t.Fatalf("not truncated or too long: %d", utf8.RuneCountInString(got.Text))
	}
	if maxRing > maxChars+200 {
		t.Errorf("tail ring held %d chars", maxRing)
	}
	// The omit cursor starts a line of the output.
	found := false
	for _, l := range all {
		if l.Cursor == got.OmitCursor {
			found = true
			break
		}
	}
	if !found || (got.OmitCursor > 0 && raw[got.OmitCursor-1] != '\n') {
		t.Errorf("omit cursor %d is not the start of a line", got.OmitCursor)
	}
	if n := naiveTruncate(all, maxChars, "big"); n != want {
		t.Errorf("Truncate differs from its definition")
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 3, "llo"},
		{"hello", 10, "hello"},
		{"hello", 0, ""},
		{"héllo✓", 2, "o✓"},
		{"", 5, ""},
	}
	for _, tt := range tests {
		if got := Tail(tt.s, tt.n); got != tt.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestMiddleTruncate(t *testing.T) {
	tests := []struct {
		s    string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abc...ijk"},
		{"abcdefghijkl", 9, "abc...jkl"},
		{"ééééééééééé", 7, "éé...éé"},
		{"abcdef", 3, "..."},
		{"abcdef", 0, "..."},
	}
	for _, tt := range tests {
		if got := MiddleTruncate(tt.s, tt.max); got != tt.want {
			t.Errorf("MiddleTruncate(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
}

func TestSnippet(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"  \n\t ", ""},
		{"  hello \n\n world\t!  \n", "hello world !"},
		{strings.Repeat("x", 180), strings.Repeat("x", 180)},
		{strings.Repeat("x", 181), strings.Repeat("x", 180) + "…"},
		{strings.Repeat("a", 500) + strings.Repeat("b", 400), strings.Repeat("b", 180) + "…"},
		{strings.Repeat("é ", 50), strings.TrimSpace(strings.Repeat("é ", 50))},
	}
	for _, tt := range tests {
		if got := Snippet(tt.in); got != tt.want {
			t.Errorf("Snippet(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestBoundShapes: Bound and CutLine keep any text within their limit,
// whatever its shape, and leave short texts alone.
func TestBoundShapes(t *testing.T) {
	long := strings.Repeat("x", 100000)
	shapes := map[string]string{
		"one long line":   long,
		"many long lines": strings.Repeat(long[:5000]+"\n", 40),
		"short lines":     strings.Repeat("abc\n", 30000),
		"multibyte":       strings.Repeat("é€😀", 20000),
		"invalid utf8":    strings.Repeat("\xff\xfe a\n", 20000),
		"newlines":        strings.Repeat("\n", 50000),
	}
	for name, s := range shapes {
		for _, n := range []int{0, 10, 100, 1000, 17000} {
			got, cut := Bound(s, n)
			if c := utf8.RuneCountInString(got); c > max(n, utf8.RuneCountInString(boundMarker(len(s)))) {
				t.Errorf("%s: Bound(%d) gave %d chars", name, n, c)
			}
			if !cut || !strings.Contains(got, " chars omitted …]") {
				t.Errorf("%s: Bound(%d) did not mark its cut", name, n)
			}
			line := CutLine(s, n)
			if c := utf8.RuneCountInString(line); c > max(n, utf8.RuneCountInString(boundMarker(len(s)))) {
				t.Errorf("%s: CutLine(%d) gave %d chars", name, n, c)
			}
		}
		if got, cut := Bound(s, len(s)); got != s || cut {
			t.Errorf("%s: Bound changed a text within its limit", name)
		}
		if got := CutLine(s, len(s)); got != s {
			t.Errorf("%s: CutLine changed a text within its limit", name)
		}
	}
	got, _ := Bound(strings.Repeat("line\n", 1000), 500)
	if !strings.HasPrefix(got, "line\nline\n") || !strings.HasSuffix(got, "line\nline\n") {
		t.Errorf("Bound of short lines not cut at line boundaries: %q", got)
	}
}
