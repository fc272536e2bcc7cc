package render

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// shapes generates outputs of many shapes around a size: without any
// newline, one huge line, many short lines, CRLF, multi-byte UTF-8 (so
// that cut points fall inside characters), invalid UTF-8, escape sequences
// (so that cut points fall inside them), and lines longer than half the
// head.
func shapes(size int) map[string][]byte {
	rep := func(unit string) []byte {
		var b bytes.Buffer
		for b.Len() < size {
			b.WriteString(unit)
		}
		return b.Bytes()[:size]
	}
	lines := func(f func(i int) string) []byte {
		var b bytes.Buffer
		for i := 0; b.Len() < size; i++ {
			b.WriteString(f(i))
		}
		return b.Bytes()
	}
	return map[string][]byte{
		"no-newline":   rep("a"),
		"one-line-nl":  append(rep("b"), '\n'),
		"nl-then-huge": append([]byte("x\n"), rep("c")...),
		"huge-then-nl": append(rep("d"), "\nend"...),
		"seq":          lines(func(i int) string { return fmt.Sprintf("%d\n", i+1) }),
		"crlf":         lines(func(i int) string { return fmt.Sprintf("row %d\r\n", i) }),
		"utf8-lines":   lines(func(i int) string { return fmt.Sprintf("é✓😀 %d\n", i) }),
		"utf8-nonl":    rep("é✓😀"),
		"invalid":      rep("ok\xff\xfe\xc3"),
		"ansi":         lines(func(i int) string { return fmt.Sprintf("\x1b[32mok\x1b[0m %d\n", i) }),
		"ansi-nonl":    rep("\x1b[1;31mred\x1b[0m"),
		"long-lines":   lines(func(i int) string { return strings.Repeat(string(rune('a'+i%26)), 700+i%500) + "\n" }),
		"empty-lines":  rep("\n"),
		"repeats":      lines(func(i int) string { return fmt.Sprintf("same\nsame\nsame\nother %d\n", i) }),
	}
}

// TestTruncateShapes checks the invariants of a truncated result on
// generated outputs: it fits the bound, it is the exact head and tail of
// the full text with a correct omitted count, both ends are non-empty, the
// head ends at a line boundary when one lies in the upper half of the head
// budget, no character is split.
func TestTruncateShapes(t *testing.T) {
	for _, limit := range []int{1000, 4000, 30000} {
		for _, size := range []int{limit / 2, limit - 1, limit, limit + 1, 3 * limit, 20 * limit} {
			for name, raw := range shapes(size) {
				h := NewHeadTail(limit)
				var f Folder
				var full []string
				r := New(0, Options{})
				add := func(l Line) { full = append(full, l.Text); h.Add(l) }
				fold := func(l Line) { f.Add(l, add) }
				// Odd-sized writes: sequences split across writes.
				for rest := raw; len(rest) > 0; {
					k := min(len(rest), 997)
					r.Write(rest[:k], fold)
					rest = rest[k:]
				}
				r.Flush(fold)
				f.Flush(add)
				ex := h.Excerpt("sid")
				checkExcerpt(t, fmt.Sprintf("%s/limit %d/size %d", name, limit, size), strings.Join(full, "\n"), ex, limit, raw)
			}
		}
	}
}

func checkExcerpt(t *testing.T, what, full string, ex Excerpt, limit int, raw []byte) {
	t.Helper()
	if !utf8.ValidString(ex.Text) {
		t.Fatalf("%s: invalid UTF-8", what)
	}
	runes := []rune(full)
	total := len(runes)
	if ex.Chars != total {
		t.Fatalf("%s: Chars %d, want %d", what, ex.Chars, total)
	}
	if total <= limit {
		if ex.Truncated || ex.Text != full {
			t.Fatalf("%s: %d chars within %d changed", what, total, limit)
		}
		return
	}
	if !ex.Truncated {
		t.Fatalf("%s: %d chars over %d not truncated", what, total, limit)
	}
	marker := OmitMarker(ex.OmittedChars, "sid", ex.OmitCursor)
	if n := utf8.RuneCountInString(ex.Text); n > limit+utf8.RuneCountInString(marker)+2 {
		t.Fatalf("%s: %d chars, bound %d + marker", what, n, limit)
	}
	i := strings.Index(ex.Text, marker)
	if i < 0 {
		t.Fatalf("%s: marker %q missing", what, marker)
	}
	head := strings.TrimSuffix(ex.Text[:i], "\n")
	if i > 0 && !strings.HasSuffix(ex.Text[:i], "\n") {
		t.Fatalf("%s: marker not on a line of its own", what)
	}
	rest := ex.Text[i+len(marker):]
	if !strings.HasPrefix(rest, "\n") {
		t.Fatalf("%s: marker not followed by a newline", what)
	}
	hn := utf8.RuneCountInString(head)
	// The tail is rest (it starts with its own newline) or rest[1:].
	tail := rest
	if tn := utf8.RuneCountInString(tail); hn+tn+ex.OmittedChars != total || !strings.HasSuffix(full, tail) {
		tail = rest[1:]
	}
	tn := utf8.RuneCountInString(tail)
	if hn+tn+ex.OmittedChars != total {
		t.Fatalf("%s: head %d + tail %d + omitted %d != total %d", what, hn, tn, ex.OmittedChars, total)
	}
	if !strings.HasPrefix(full, head) || !strings.HasSuffix(full, tail) {
		t.Fatalf("%s: head or tail is not the text's own", what)
	}
	if hn+tn > limit {
		t.Fatalf("%s: head %d + tail %d over %d", what, hn, tn, limit)
	}
	if strings.TrimSpace(full) != "" && (strings.Trim(head, "\n") == "" && len(runes) > 0 && runes[0] != '\n' || tail == "") {
		t.Fatalf("%s: empty head %q or tail %q", what, head, tail)
	}
	// The head ends at the last newline within its budget when that keeps
	// at least half of it.
	hm := limit / 4
	k := -1
	for j := min(hm, total-1); j > 0; j-- {
		if runes[j] == '\n' {
			k = j
			break
		}
	}
	if k > 0 && 2*k >= hm && hn != k {
		t.Fatalf("%s: head of %d chars, want %d (line boundary)", what, hn, k)
	}
	if (k <= 0 || 2*k < hm) && hn != hm {
		t.Fatalf("%s: head of %d chars, want %d (no boundary near)", what, hn, hm)
	}
	// The omit cursor starts a line.
	if c := ex.OmitCursor; c < 0 || c > int64(len(raw)) || c > 0 && raw[c-1] != '\n' {
		t.Fatalf("%s: omit cursor %d is not a line start", what, c)
	}
}

// TestCutShapes checks CutHead and CutTail, which build the result of an
// output too large to render whole from a read at each end, on the same
// shapes: within the budget, the text's own start or end, non-empty, no
// character split, at a line boundary when one is near.
func TestCutShapes(t *testing.T) {
	for _, n := range []int{250, 7500} {
		for name, raw := range shapes(40 * n) {
			// Head: a read of the first 4n bytes, its last line Partial.
			hl := Lines(raw[:4*n], 0, Options{})
			head := CutHead(hl, n)
			full := Text(raw)
			what := fmt.Sprintf("%s/%d", name, n)
			if !utf8.ValidString(head.Text) || head.Chars != utf8.RuneCountInString(head.Text) || head.Chars > n {
				t.Fatalf("%s: head %d chars (%d), budget %d", what, utf8.RuneCountInString(head.Text), head.Chars, n)
			}
			if !strings.HasPrefix(full, head.Text) {
				t.Fatalf("%s: head is not the start of the text", what)
			}
			if strings.Trim(full[:min(len(full), 8*n)], "\n") != "" && strings.Trim(head.Text, "\n") == "" && name != "empty-lines" {
				t.Fatalf("%s: empty head", what)
			}
			if head.Edge < 0 || head.Edge > int64(4*n) {
				t.Fatalf("%s: head edge %d", what, head.Edge)
			}
			// Tail: a read of the last 4n bytes, resynchronised.
			start := len(raw) - 4*n
			tl := Lines(raw[start:], int64(start), Options{Resync: true})
			tail := CutTail(tl, n, true)
			if !utf8.ValidString(tail.Text) || tail.Chars != utf8.RuneCountInString(tail.Text) || tail.Chars > n {
				t.Fatalf("%s: tail %d chars (%d), budget %d", what, utf8.RuneCountInString(tail.Text), tail.Chars, n)
			}
			if !strings.HasSuffix(strings.TrimSuffix(full, "\n"), tail.Text) {
				t.Fatalf("%s: tail %q is not the end of the text", what, Tail(tail.Text, 40))
			}
			if strings.TrimSpace(full) != "" && tail.Text == "" && name != "empty-lines" {
				t.Fatalf("%s: empty tail", what)
			}
			if tail.Edge < int64(start) || tail.Edge > int64(len(raw)) || tail.Edge < head.Edge {
				t.Fatalf("%s: tail edge %d outside [%d, %d]", what, tail.Edge, start, len(raw))
			}
			// Short lines: both ends at line boundaries.
			if name == "seq" || name == "crlf" || name == "utf8-lines" || name == "ansi" {
				if !strings.HasPrefix(full, head.Text+"\n") || !strings.Contains(full, "\n"+tail.Text) {
					t.Fatalf("%s: cut inside a line: head ends %q, tail starts %q", what, Tail(head.Text, 20), headRunes(tail.Text, 20))
				}
			}
		}
	}
}
