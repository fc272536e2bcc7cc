package render

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// An Excerpt is the possibly truncated text of a sequence of lines, made by
// [Truncate] or [HeadTail.Excerpt].
type Excerpt struct {
	// Text is the lines joined by "\n" (no newline after the last), or, when
	// Truncated, the kept head, the omission marker on a line of its own,
	// and the kept tail.
	Text string
	// Chars is the length of the full joined text, in code points.
	Chars int
	// Truncated reports that the full text was longer than the limit.
	Truncated bool
	// OmittedChars is the number of code points left out (0 unless
	// Truncated).
	OmittedChars int
	// OmitCursor is, when Truncated, the Cursor of the line holding the first
	// omitted character — the first line not shown in full in the head — so
	// that `process log since=<OmitCursor>` reads the middle. A newline
	// between two lines counts as held by the line after it. Zero unless
	// Truncated.
	OmitCursor int64
}

// OmitMarker returns the line that replaces omitted text:
// "[… <n> chars omitted; full output: process log sessionId=<id> since=<cursor> …]".
func OmitMarker(n int, sessionID string, cursor int64) string {
	return "[… " + strconv.Itoa(n) + " chars omitted; full output: process log sessionId=" +
		sessionID + " since=" + strconv.FormatInt(cursor, 10) + " …]"
}

// Truncate joins the texts of lines with "\n" and caps the result at
// maxChars code points (tools.exec.maxOutputChars): if it is longer, a head
// of at most maxChars/4 code points and a tail of the rest of the budget
// are kept around an [OmitMarker] naming sessionID. maxChars ≤ 0 means no
// limit. It is [HeadTail] applied to a slice.
//
// The head ends at a line boundary: it is the complete lines that fit in
// maxChars/4, as long as they fill at least half of it; otherwise (one long
// line, no newline at all) it is cut inside the line. The tail is the
// complete last lines that fit in what the head left of maxChars, as long
// as they fill at least half of it; otherwise it starts inside a line. The
// head and the tail together never exceed maxChars code points, a cut
// never splits a code point, and OmittedChars is exactly the number of
// code points not shown.
func Truncate(lines []Line, maxChars int, sessionID string) Excerpt {
	h := NewHeadTail(maxChars)
	for _, l := range lines {
		h.Add(l)
	}
	return h.Excerpt(sessionID)
}

// HeadTail is the streaming form of [Truncate], for outputs too large to
// hold: it keeps the head (at most the first maxChars/4 code points of the
// joined text) and a ring of the last lines covering what the head leaves
// of maxChars, and counts the rest. Its memory is about maxChars code
// points plus one line. Create it with [NewHeadTail]; it is not safe for concurrent use.
type HeadTail struct {
	limit   int // maxChars; ≤ 0: no limit
	headMax int // code points of head to keep
	tailMax int // code points of tail to keep

	lines int // lines added
	total int // code points of the joined text so far

	head       []byte // first headMax code points (or all, unlimited)
	headChars  int
	headDone   bool  // head holds headMax code points
	omitCursor int64 // Cursor of the line holding code point headMax
	omitKnown  bool

	ring      []piece // the last lines, oldest first from ringOff
	ringOff   int
	ringChars int // code points in ring[ringOff:]
}

// piece is one line of the joined text: its text preceded, except for the
// first line, by the "\n" that joins it.
type piece struct {
	sep   bool
	text  string
	chars int // code points, separator included
}

func (p piece) String() string {
	if p.sep {
		return "\n" + p.text
	}
	return p.text
}

// NewHeadTail returns a HeadTail capping at maxChars code points; maxChars ≤ 0
// means no limit (and then everything is kept).
func NewHeadTail(maxChars int) *HeadTail {
	h := &HeadTail{limit: maxChars}
	if maxChars > 0 {
		h.headMax = maxChars / 4
		h.tailMax = maxChars - h.headMax
		h.headDone = h.headMax == 0
	}
	return h
}

// Add appends one line.
func (h *HeadTail) Add(l Line) {
	p := piece{sep: h.lines > 0, text: l.Text}
	p.chars = utf8.RuneCountInString(l.Text)
	if p.sep {
		p.chars++
	}
	h.lines++
	h.total += p.chars

	if h.limit <= 0 {
		h.head = append(h.head, p.String()...)
		h.headChars += p.chars
		return
	}

	switch {
	case !h.headDone:
		need := h.headMax - h.headChars
		if p.chars <= need {
			if p.sep {
				h.head = append(h.head, '\n')
			}
			h.head = append(h.head, p.text...)
			h.headChars += p.chars
			h.headDone = h.headChars == h.headMax
		} else {
			// The line does not fit. Stop at the line boundary before it
			// when the complete lines fill at least half of the head;
			// otherwise cut inside the line.
			if h.headChars == 0 || 2*h.headChars < h.headMax {
				h.head = append(h.head, headRunes(p.String(), need)...)
				h.headChars = h.headMax
			}
			h.headDone = true
			h.omitCursor, h.omitKnown = l.Cursor, true
		}
	case !h.omitKnown && p.chars > 0:
		h.omitCursor, h.omitKnown = l.Cursor, true
	}

	h.ring = append(h.ring, p)
	h.ringChars += p.chars
	keep := h.tailKeep()
	for len(h.ring)-h.ringOff > 1 && h.ringChars-h.ring[h.ringOff].chars >= keep {
		h.ringChars -= h.ring[h.ringOff].chars
		h.ring[h.ringOff] = piece{}
		h.ringOff++
	}
	if h.ringOff > 64 && h.ringOff > len(h.ring)/2 {
		n := copy(h.ring, h.ring[h.ringOff:])
		clear(h.ring[n:])
		h.ring = h.ring[:n]
		h.ringOff = 0
	}
}

// tailKeep is how many code points of the end the ring must cover: the
// budget the head leaves (tailMax until the head is known).
func (h *HeadTail) tailKeep() int {
	if h.headDone {
		return h.limit - h.headChars
	}
	return h.tailMax
}

// Chars returns the length of the joined text so far, in code points.
func (h *HeadTail) Chars() int { return h.total }

// Excerpt returns the text of the lines added so far, truncated around an
// [OmitMarker] naming sessionID if it is longer than the limit. The marker
// is placed on a line of its own: a "\n" is added before it unless the head
// is empty or ends in "\n", and after it unless the tail starts with "\n".
func (h *HeadTail) Excerpt(sessionID string) Excerpt {
	if h.limit <= 0 || h.total <= h.limit {
		text := string(h.head)
		if h.limit > 0 {
			text += h.last(h.total - h.headChars)
		}
		return Excerpt{Text: text, Chars: h.total}
	}
	tail, tailChars := h.lastLines(h.limit - h.headChars)
	omitted := h.total - h.headChars - tailChars
	var b strings.Builder
	b.Grow(len(h.head) + len(tail) + 120)
	b.Write(h.head)
	if len(h.head) > 0 && h.head[len(h.head)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString(OmitMarker(omitted, sessionID, h.omitCursor))
	if !strings.HasPrefix(tail, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(tail)
	return Excerpt{
		Text:         b.String(),
		Chars:        h.total,
		Truncated:    true,
		OmittedChars: omitted,
		OmitCursor:   h.omitCursor,
	}
}

// last returns the last n code points of the joined text; n must not exceed
// what the ring holds.
func (h *HeadTail) last(n int) string {
	if n <= 0 {
		return ""
	}
	ring := h.ring[h.ringOff:]
	i, acc := len(ring), 0
	for i > 0 && acc < n {
		i--
		acc += ring[i].chars
	}
	var b strings.Builder
	first := ring[i].String()
	b.WriteString(tailRunes(first, ring[i].chars-(acc-n)))
	for _, p := range ring[i+1:] {
		if p.sep {
			b.WriteByte('\n')
		}
		b.WriteString(p.text)
	}
	return b.String()
}

// lastLines returns the tail of a truncated excerpt: the complete last
// lines (each with the "\n" before it) that fit in n code points if they
// fill at least half of n, else the last n code points. It returns the
// text and its length in code points.
func (h *HeadTail) lastLines(n int) (string, int) {
	if n <= 0 {
		return "", 0
	}
	ring := h.ring[h.ringOff:]
	i, acc := len(ring), 0
	for i > 0 && acc+ring[i-1].chars <= n {
		i--
		acc += ring[i].chars
	}
	if i > 0 && (acc == 0 || 2*acc < n) {
		// No boundary close enough: cut inside the line.
		return h.last(n), n
	}
	var b strings.Builder
	for _, p := range ring[i:] {
		if p.sep {
			b.WriteByte('\n')
		}
		b.WriteString(p.text)
	}
	return b.String(), acc
}

// headRunes returns the first n code points of s.
func headRunes(s string, n int) string {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

// tailRunes returns the last n code points of s.
func tailRunes(s string, n int) string {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// Tail returns the last n code points of s (all of s if it is shorter; ""
// if n ≤ 0). An invalid byte counts as one code point.
func Tail(s string, n int) string {
	if n <= 0 {
		return ""
	}
	return tailRunes(s, n)
}

// MiddleTruncate returns s if it has at most maxChars code points; otherwise
// its first floor((maxChars−3)/2) code points, "...", and as many from its
// end.
func MiddleTruncate(s string, maxChars int) string {
	if utf8.RuneCountInString(s) <= maxChars {
		return s
	}
	k := max((maxChars-3)/2, 0)
	return headRunes(s, k) + "..." + tailRunes(s, k)
}

// Snippet returns the snippet an exit notice carries: its last 400 code points with every run of white space collapsed
// to one space and trimmed; if that is longer than 180 code points, its
// first 180 followed by "…".
func Snippet(s string) string {
	s = Tail(s, 400)
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, c := range s {
		if unicode.IsSpace(c) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(c)
	}
	out := b.String()
	if utf8.RuneCountInString(out) > 180 {
		out = headRunes(out, 180) + "…"
	}
	return out
}

// A Cut is one end of a truncated text built from some of its lines by
// [CutHead] or [CutTail].
type Cut struct {
	// Text is the kept text: lines joined by "\n", the first or last one
	// possibly cut inside.
	Text string
	// Chars is the length of Text in code points.
	Chars int
	// Line is the Cursor of the line holding the first omitted character
	// (CutHead) or the first kept one (CutTail); for CutHead of lines that
	// all fit, the End of the last line.
	Line int64
	// Edge estimates the raw cursor where the omitted part begins (CutHead)
	// or ends (CutTail): exact at a line boundary, counted in bytes of the
	// kept text inside a cut line.
	Edge int64
}

// CutHead keeps the start of the text of lines within n code points, by
// the rule of [Truncate]: the complete lines that fit if they fill at least
// half of n, else the first n code points. A Partial line counts as not
// complete (it was cut by the end of a read), so it is only ever cut.
func CutHead(lines []Line, n int) Cut {
	var b strings.Builder
	c := Cut{}
	for i, l := range lines {
		s := l.Text
		if i > 0 {
			s = "\n" + s
		}
		k := utf8.RuneCountInString(s)
		if c.Chars+k <= n && !l.Partial {
			b.WriteString(s)
			c.Chars += k
			c.Line, c.Edge = l.End, l.End
			continue
		}
		c.Line, c.Edge = l.Cursor, l.Cursor
		if c.Chars == 0 || 2*c.Chars < n {
			part := headRunes(s, n-c.Chars)
			b.WriteString(part)
			c.Chars += utf8.RuneCountInString(part)
			c.Edge += int64(len(strings.TrimPrefix(part, "\n")))
		}
		break
	}
	c.Text = b.String()
	return c
}

// CutTail keeps the end of the text of lines within n code points, by the
// rule of [Truncate]. With fragment set, lines[0] began before the read
// and is only ever cut, never kept as a complete line. The kept complete
// lines are not preceded by a "\n" in Text.
func CutTail(lines []Line, n int, fragment bool) Cut {
	c := Cut{}
	i := len(lines)
	acc := 0 // code points of lines[i:] joined, each with its separator
	for i > 0 {
		l := lines[i-1]
		k := utf8.RuneCountInString(l.Text) + 1
		if acc+k > n || (i == 1 && fragment) {
			break
		}
		i--
		acc += k
	}
	texts := make([]string, 0, len(lines)-i)
	for _, l := range lines[i:] {
		texts = append(texts, l.Text)
	}
	if i == len(lines) {
		c.Edge = 0
		if len(lines) > 0 {
			c.Edge = lines[len(lines)-1].End
		}
	} else {
		c.Edge = lines[i].Cursor
	}
	c.Line = c.Edge
	if i > 0 && (acc == 0 || 2*acc < n) {
		// Cut inside lines[i-1]: the last n code points of it and the
		// lines after it.
		l := lines[i-1]
		rest := strings.Join(texts, "\n")
		s := l.Text
		if len(texts) > 0 {
			s += "\n" + rest
		}
		part := tailRunes(s, n)
		kept := len(part) // bytes of part inside l
		if len(texts) > 0 {
			kept -= len(rest) + 1
		}
		end := l.End // estimate: the line's text ends one byte (LF) before End
		if !l.Partial {
			end--
		}
		c.Text, c.Chars = part, utf8.RuneCountInString(part)
		c.Line = l.Cursor
		c.Edge = max(end-int64(max(kept, 0)), l.Cursor)
		return c
	}
	c.Text = strings.Join(texts, "\n")
	c.Chars = max(acc-1, 0) // without the separator before the first line
	return c
}
