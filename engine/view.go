package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/term/render"
)

// readOpts select what a read of a session's journal renders.
type readOpts struct {
	since  int64
	raw    bool
	stream journal.Stream // 0: both
	// exact says since is a line boundary: no resynchronisation guess.
	exact bool
	// outputEnd, if > 0, is how much output the session recorded in all
	// (its exit record): a journal that ends before it lost its end.
	outputEnd int64
	// maxLine, if > 0, breaks lines longer than that many bytes
	// (render.Options.MaxLineBytes; default 1 MiB).
	maxLine int
	// until, if > 0, ends the read at that cursor (outputEnd is then not
	// checked).
	until int64
	// done, if set, is asked after each journal chunk: true ends the read
	// there (the reader has all it wants). The result's end is then
	// where the read stopped.
	done func() bool
}

// readResult describes a finished read.
type readResult struct {
	end          int64 // cursor after the last byte covered
	skippedBytes int64 // since fell inside the dropped range
	droppedLines int64 // lines in the dropped range, if the read crossed it
	unreadable   int64 // output bytes lost to damaged journal records
}

// unreadableMarker is the line that stands for output a damaged journal
// lost.
func unreadableMarker(bytes int64) string {
	return fmt.Sprintf("[… %d bytes unreadable …]", bytes)
}

// splitGap splits the jump of a read from cursor a to b into the part in
// the dropped range [info.HeadEnd, info.TailStart) and the rest, which
// damaged records lost.
func splitGap(info journal.Info, a, b int64) (dropped, lost int64) {
	if info.DroppedBytes > 0 {
		dropped = max(0, min(b, info.TailStart)-max(a, info.HeadEnd))
	}
	return dropped, b - a - dropped
}

// removed reports whether a journal's directory is gone: its session was
// removed (remove, clear, the cleanup sweep) while it was read, which is
// no damage.
func removed(dir string) bool {
	_, err := os.Stat(dir)
	return errors.Is(err, fs.ErrNotExist)
}

// gapMarker is the line that stands for a dropped range.
func gapMarker(bytes, lines int64) string {
	return fmt.Sprintf("[… %d bytes (%d lines) dropped …]", bytes, lines)
}

// readLines renders a session journal from o.since into lines. A dropped
// range becomes one marker line. With a stream filter the other stream is
// skipped; line cursors still refer to the combined stream.
func readLines(dir string, o readOpts, emit func(render.Line)) (readResult, error) {
	var res readResult
	since := max(o.since, 0)
	r := render.New(since, render.Options{Raw: o.raw, Resync: since > 0 && !o.exact, MaxLineBytes: o.maxLine})
	if since > 0 && !o.exact && o.stream == 0 {
		// The bytes before since tell the renderer's state exactly where
		// the guess of Resync could drop text ("5m30s" at a line start):
		// a page that ends at a line or a line break continues exactly.
		if ctx := journalBefore(dir, since, primeBytes); ctx != nil {
			r.Prime(ctx)
		}
	}
	expected := since
	first := true
	var info *journal.Info
	// With a stream filter the renderer sees only one stream's bytes; its
	// positions are mapped back to journal cursors through the spans of
	// the chunks it was given.
	var spans []span
	rpos := since
	out := emit
	if o.stream != 0 {
		out = func(l render.Line) {
			l.Cursor, l.End = mapCursor(spans, l.Cursor), mapCursor(spans, l.End)
			emit(l)
		}
	}
	stopped := false
	errDone := errors.New("done")
	until := int64(-1)
	if o.until > 0 {
		until = o.until
	}
	end, err := journal.ReadRange(dir, since, until, func(c journal.Chunk) error {
		if o.done != nil && o.done() {
			stopped = true
			return errDone
		}
		if c.Cursor > expected {
			var dropped, lost int64
			info, dropped, lost = accountGap(dir, info, expected, c.Cursor)
			r.Flush(out)
			if first {
				res.skippedBytes = dropped
			} else if dropped > 0 {
				emit(render.Line{Cursor: expected, End: expected + dropped, Text: gapMarker(dropped, info.DroppedLines)})
				res.droppedLines = info.DroppedLines
			}
			if lost > 0 {
				emit(render.Line{Cursor: c.Cursor - lost, End: c.Cursor, Text: unreadableMarker(lost)})
				res.unreadable += lost
			}
			r = render.New(c.Cursor, render.Options{Raw: o.raw, Resync: true, MaxLineBytes: o.maxLine})
			rpos = c.Cursor
		}
		first = false
		expected = c.End()
		if o.stream != 0 && c.Stream != o.stream {
			return nil
		}
		if o.stream != 0 {
			spans = append(spans, span{rpos, c.Cursor})
			rpos += int64(len(c.Data))
		}
		r.Write(c.Data, out)
		return nil
	})
	if stopped {
		// The reader has what it wants: no partial line, no lost end.
		return readResult{end: expected, skippedBytes: res.skippedBytes, droppedLines: res.droppedLines, unreadable: res.unreadable}, nil
	}
	r.Flush(out)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err == nil && o.until <= 0 && o.outputEnd > max(end, since) && !removed(dir) {
		// The journal's end is lost (a segment cut short).
		lost := o.outputEnd - max(end, since)
		emit(render.Line{Cursor: o.outputEnd - lost, End: o.outputEnd, Text: unreadableMarker(lost)})
		res.unreadable += lost
		end = o.outputEnd
	}
	res.end = end
	if end < since && err == nil {
		// since beyond the end: nothing new; the cursor is the end.
		res.end = end
	}
	return res, err
}

// accountGap splits the journal's gap [from, to) into what it dropped on
// purpose (the writer's cap, a quota trim) and what is lost, from info
// (the journal's account, read when nil). The cap or a trim may have
// dropped more since info was read (the dropped range grows while the
// command writes): only what the journal's newest account does not
// explain is damage, and nothing is when the session was removed
// meanwhile.
func accountGap(dir string, info *journal.Info, from, to int64) (*journal.Info, int64, int64) {
	if info == nil {
		i, _ := journal.Stat(dir)
		info = &i
	}
	dropped, lost := splitGap(*info, from, to)
	if lost > 0 {
		i, _ := journal.Stat(dir)
		info = &i
		dropped, lost = splitGap(*info, from, to)
		if removed(dir) {
			lost = 0
		}
	}
	return info, dropped, lost
}

// primeBytes is how many bytes before a read's start prime its renderer.
const primeBytes = 512

// journalBefore returns the n output bytes (both streams) before cursor
// since, or nil if they are not all in the journal (dropped, damaged).
func journalBefore(dir string, since int64, n int64) []byte {
	from := max(since-n, 0)
	var b []byte
	next := from
	errStop := errors.New("stop")
	journal.Read(dir, from, func(c journal.Chunk) error {
		if c.Cursor != next {
			b = nil
			return errStop
		}
		d := c.Data
		if c.Cursor+int64(len(d)) > since {
			d = d[:max(since-c.Cursor, 0)]
		}
		b = append(b, d...)
		next = c.Cursor + int64(len(d))
		if next >= since {
			return errStop
		}
		return nil
	})
	if next != since {
		return nil
	}
	return b
}

// span maps a renderer position to the journal cursor of the same byte.
type span struct{ rstart, cursor int64 }

func mapCursor(spans []span, x int64) int64 {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].rstart > x }) - 1
	if i < 0 {
		return x
	}
	return spans[i].cursor + (x - spans[i].rstart)
}

// outputText is the rendered output of a run for an exec result.
type outputText struct {
	text       string
	truncated  bool
	cursor     int64
	unreadable int64 // output bytes lost to a damaged journal
}

// renderAllLimit is the retained journal size up to which exec results are
// rendered whole; beyond it only the head and the tail are rendered and
// the omitted count is estimated from raw bytes (docs/tools.md).
const renderAllLimit = 8 << 20

// output renders a session's whole output for an exec result: repeats
// folded, capped at maxChars with head and tail kept.
func (e *Engine) output(s *session, maxChars int) outputText {
	info, _ := journal.Stat(s.journal())
	out := e.renderOutput(s, info, maxChars)
	if info.DroppedBytes > 0 {
		// The journal cap dropped part of the output: the result is
		// truncated whatever fits, and the marker must not promise the
		// full output.
		out.truncated = true
		out.text = strings.Replace(out.text, "; full output: process log", fmt.Sprintf("; %d bytes of it were dropped for good by the journal cap; what was kept: process log", info.DroppedBytes), 1)
	}
	return out
}

func (e *Engine) renderOutput(s *session, info journal.Info, maxChars int) outputText {
	dir := s.journal()
	if info.End-info.DroppedBytes <= renderAllLimit {
		ht := render.NewHeadTail(maxChars)
		var f render.Folder
		res, _ := readLines(dir, readOpts{outputEnd: s.outputEnd()}, func(l render.Line) { f.Add(l, ht.Add) })
		f.Flush(ht.Add)
		ex := ht.Excerpt(s.id)
		e.journalDamage(s, res)
		return outputText{text: ex.Text, truncated: ex.Truncated || res.unreadable > 0, cursor: res.end, unreadable: res.unreadable}
	}
	return e.outputHeadTail(s, info, maxChars)
}

// outputHeadTail renders only the first and the last part of a large
// output: lines rendered from a raw-byte budget at the start and at the
// end of the journal, cut by the rule of render.Truncate (at a line
// boundary when the complete lines fill at least half of their part,
// inside a line otherwise, so output without newlines still shows both
// ends). The middle is never rendered, so the omitted count in the marker
// is the number of raw bytes between the two parts (an estimate of
// characters; docs/differences.md).
func (e *Engine) outputHeadTail(s *session, info journal.Info, maxChars int) outputText {
	dir := s.journal()
	headMax := maxChars / 4

	// Head: lines from the first headMax*4 raw bytes; the last one, cut
	// by the end of the read, is Partial.
	budget := int64(headMax)*4 + 4096
	var headLines []render.Line
	var hf render.Folder
	addHead := func(l render.Line) { headLines = append(headLines, l) }
	hr := render.New(0, render.Options{})
	errStop := errors.New("stop")
	journal.Read(dir, 0, func(c journal.Chunk) error {
		if c.Cursor >= budget || c.Cursor >= info.HeadEnd && info.DroppedBytes > 0 {
			return errStop
		}
		hr.Write(c.Data, func(l render.Line) { hf.Add(l, addHead) })
		return nil
	})
	hr.Flush(func(l render.Line) { hf.Add(l, addHead) })
	hf.Flush(addHead)
	head := render.CutHead(headLines, headMax)

	// Tail: lines from the last (maxChars−head)*4 raw bytes; the first
	// one may have started before the read.
	tailMax := maxChars - head.Chars
	var tailLines []render.Line
	var tf render.Folder
	var tr *render.Renderer
	readStart := int64(-1)
	addTail := func(l render.Line) { tailLines = append(tailLines, l) }
	journal.ReadTail(dir, int64(tailMax)*4+4096, func(c journal.Chunk) error {
		if tr == nil {
			tr = render.New(c.Cursor, render.Options{Resync: true})
			readStart = c.Cursor
		}
		tr.Write(c.Data, func(l render.Line) { tf.Add(l, addTail) })
		return nil
	})
	if tr != nil {
		tr.Flush(func(l render.Line) { tf.Add(l, addTail) })
	}
	tf.Flush(addTail)
	tail := render.CutTail(tailLines, tailMax, readStart > 0)
	omitted := max(tail.Edge-head.Edge, 0)
	var b strings.Builder
	b.WriteString(head.Text)
	if head.Text != "" {
		b.WriteByte('\n')
	}
	b.WriteString(render.OmitMarker(int(omitted), s.id, head.Line))
	if tail.Text != "" {
		b.WriteByte('\n')
		b.WriteString(tail.Text)
	}
	return outputText{text: b.String(), truncated: true, cursor: info.End}
}

// tail returns the last n characters of a session's rendered, folded
// output and the journal end cursor.
func (e *Engine) tail(s *session, n int) (string, int64) {
	dir := s.journal()
	var lines []string
	var f render.Folder
	var r *render.Renderer
	add := func(l render.Line) { lines = append(lines, l.Text) }
	start, end, _ := journal.ReadTail(dir, int64(n)*4+256, func(c journal.Chunk) error {
		if r == nil {
			r = render.New(c.Cursor, render.Options{Resync: c.Cursor > 0})
		}
		r.Write(c.Data, func(l render.Line) { f.Add(l, add) })
		return nil
	})
	_ = start
	if r != nil {
		r.Flush(func(l render.Line) { f.Add(l, add) })
	}
	f.Flush(add)
	text := strings.TrimRight(strings.Join(lines, "\n"), "\n")
	return render.Tail(text, n), end
}

// journalEnd returns the end cursor of a journal directory.
func journalEnd(dir string) (int64, error) {
	info, err := journal.Stat(dir)
	return info.End, err
}

// Chunk is the next piece of a session's output for a follower (the
// session stream): whole rendered lines after Since, and where to go on.
type Chunk struct {
	Text   string // lines joined by "\n"; "" when nothing new
	Next   int64  // cursor to continue from
	Ended  bool   // the session has ended and everything was delivered
	More   bool   // more output is ready at once (FollowBytes hit its size limit)
	State  string
	Exit   *int
	Signal *string
	Killed *string
}

// Follow reads agent's session id from since for a follower: while the
// session runs, a trailing partial line is held back until it is
// complete, so no line is ever split between two chunks.
func (e *Engine) Follow(agent, id string, since int64, raw bool, stream string) (Chunk, bool) {
	s := e.lookup(agent, id)
	if s == nil {
		return Chunk{}, false
	}
	st, ex, _ := s.snapshot()
	if st.Hidden {
		return Chunk{}, false
	}
	var lines []render.Line
	res, _ := readLines(s.journal(), readOpts{since: since, raw: raw, stream: streamOf(stream)}, func(l render.Line) { lines = append(lines, l) })
	c := Chunk{Next: res.end, State: "running"}
	if ex == nil && len(lines) > 0 && lines[len(lines)-1].Partial {
		c.Next = lines[len(lines)-1].Cursor
		lines = lines[:len(lines)-1]
	}
	texts := make([]string, len(lines))
	for i, l := range lines {
		texts[i] = l.Text
	}
	c.Text = strings.Join(texts, "\n")
	if ex != nil {
		c.Ended, c.State, c.Exit, c.Signal, c.Killed = true, ex.State, ex.ExitCode, ex.Signal, ex.KilledBy
	}
	return c, true
}

// lineTail keeps the newest lines of a stream, bounded by a number of
// lines (maxLines > 0) or of characters (maxChars > 0), and counts what
// went through, so that reading a 64 MiB journal for its end costs memory
// for the end only.
type lineTail struct {
	maxLines, maxChars int
	ring               []string
	ringChars          int
	total              int // lines seen
	chars              int // characters of the joined text seen
	first              string
	firstSet           bool
}

func newLineTail(maxLines, maxChars int) *lineTail {
	return &lineTail{maxLines: maxLines, maxChars: maxChars}
}

func (t *lineTail) add(s string) {
	n := utf8.RuneCountInString(s)
	if t.total > 0 {
		t.chars++ // the joining newline
	}
	t.total++
	t.chars += n
	if !t.firstSet {
		t.first, t.firstSet = s, true
	}
	t.ring = append(t.ring, s)
	t.ringChars += n + 1
	for len(t.ring) > 1 && (t.maxLines > 0 && len(t.ring) > t.maxLines || t.maxChars > 0 && t.ringChars-utf8.RuneCountInString(t.ring[0])-1 >= t.maxChars) {
		t.ringChars -= utf8.RuneCountInString(t.ring[0]) + 1
		t.ring = t.ring[1:]
	}
	if cap(t.ring) > 4*len(t.ring)+64 {
		t.ring = append([]string(nil), t.ring...)
	}
}

func (t *lineTail) lines() []string { return t.ring }

// leadingSpace is the whitespace a TrimSpace of the whole text removes at
// its start (as far as the first line tells).
func (t *lineTail) leadingSpace() int {
	if !t.firstSet {
		return 0
	}
	return utf8.RuneCountInString(t.first) - utf8.RuneCountInString(strings.TrimLeft(t.first, " \t\r\n"))
}
