package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/conchsh/conch/internal/journal"
	"github.com/conchsh/conch/internal/render"
)

// readOpts select what a read of a session's journal renders.
type readOpts struct {
	since  int64
	raw    bool
	stream journal.Stream // 0: both
}

// readResult describes a finished read.
type readResult struct {
	end          int64 // cursor after the last byte covered
	skippedBytes int64 // since fell inside the dropped range
	droppedLines int64 // lines in the dropped range, if the read crossed it
}

// gapMarker is the line that stands for a dropped range (process.md §3.3).
func gapMarker(bytes, lines int64) string {
	return fmt.Sprintf("[… %d bytes (%d lines) dropped …]", bytes, lines)
}

// readLines renders a session journal from o.since into lines. A dropped
// range becomes one marker line. With a stream filter the other stream is
// skipped; line cursors still refer to the combined stream.
func readLines(dir string, o readOpts, emit func(render.Line)) (readResult, error) {
	var res readResult
	since := max(o.since, 0)
	r := render.New(since, render.Options{Raw: o.raw, Resync: since > 0})
	expected := since
	first := true
	var info *journal.Info
	end, err := journal.Read(dir, since, func(c journal.Chunk) error {
		if c.Cursor > expected {
			if first {
				res.skippedBytes = c.Cursor - expected
			} else {
				if info == nil {
					i, _ := journal.Stat(dir)
					info = &i
				}
				r.Flush(emit)
				emit(render.Line{Cursor: expected, End: c.Cursor, Text: gapMarker(c.Cursor-expected, info.DroppedLines)})
				res.droppedLines = info.DroppedLines
			}
			r = render.New(c.Cursor, render.Options{Raw: o.raw, Resync: true})
		}
		first = false
		expected = c.End()
		if o.stream != 0 && c.Stream != o.stream {
			return nil
		}
		r.Write(c.Data, emit)
		return nil
	})
	r.Flush(emit)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	res.end = max(end, since)
	return res, err
}

// outputText is the rendered output of a run for an exec result.
type outputText struct {
	text      string
	truncated bool
	cursor    int64
}

// renderAllLimit is the retained journal size up to which exec results are
// rendered whole; beyond it only the head and the tail are rendered and
// the omitted count is estimated from raw bytes (docs/tools.md).
const renderAllLimit = 8 << 20

// output renders a session's whole output for an exec result: repeats
// folded, capped at maxChars with head and tail kept.
func (e *Engine) output(s *session, maxChars int) outputText {
	dir := s.journal()
	info, _ := journal.Stat(dir)
	if info.End-info.DroppedBytes <= renderAllLimit {
		ht := render.NewHeadTail(maxChars)
		var f render.Folder
		res, _ := readLines(dir, readOpts{}, func(l render.Line) { f.Add(l, ht.Add) })
		f.Flush(ht.Add)
		ex := ht.Excerpt(s.id)
		return outputText{text: ex.Text, truncated: ex.Truncated, cursor: res.end}
	}
	return e.outputHeadTail(s, info, maxChars)
}

// outputHeadTail renders only the first and the last part of a large
// output.
func (e *Engine) outputHeadTail(s *session, info journal.Info, maxChars int) outputText {
	dir := s.journal()
	headMax := maxChars / 4
	tailMax := maxChars - headMax
	var head []string
	headChars := 0
	var omitCursor int64 = -1
	errStop := errors.New("stop")
	r := render.New(0, render.Options{})
	var f render.Folder
	collect := func(l render.Line) {
		if omitCursor >= 0 {
			return
		}
		n := len([]rune(l.Text)) + 1
		if headChars+n > headMax {
			omitCursor = l.Cursor
			if room := headMax - headChars; room > 0 {
				head = append(head, string([]rune(l.Text)[:min(room, len([]rune(l.Text)))]))
			}
			return
		}
		head = append(head, l.Text)
		headChars += n
	}
	var headEnd int64
	journal.Read(dir, 0, func(c journal.Chunk) error {
		r.Write(c.Data, func(l render.Line) { f.Add(l, collect) })
		headEnd = c.End()
		if omitCursor >= 0 {
			return errStop
		}
		return nil
	})
	// The tail: enough raw bytes for tailMax characters in most outputs.
	var tailLines []render.Line
	tr := render.New(0, render.Options{Resync: true})
	var tf render.Folder
	tailStart := int64(-1)
	journal.ReadTail(dir, int64(tailMax)*4, func(c journal.Chunk) error {
		if tailStart < 0 {
			tailStart = c.Cursor
			tr = render.New(c.Cursor, render.Options{Resync: true})
		}
		tr.Write(c.Data, func(l render.Line) { tf.Add(l, func(l render.Line) { tailLines = append(tailLines, l) }) })
		return nil
	})
	tr.Flush(func(l render.Line) { tf.Add(l, func(l render.Line) { tailLines = append(tailLines, l) }) })
	tf.Flush(func(l render.Line) { tailLines = append(tailLines, l) })
	var tail []string
	tailChars := 0
	tailCursor := info.End
	for i := len(tailLines) - 1; i >= 0 && tailChars < tailMax; i-- {
		t := tailLines[i].Text
		tailCursor = tailLines[i].Cursor
		n := len([]rune(t)) + 1
		if tailChars+n > tailMax {
			rs := []rune(t)
			t = string(rs[len(rs)-(tailMax-tailChars):])
		}
		tail = append([]string{t}, tail...)
		tailChars += n
	}
	if omitCursor < 0 {
		omitCursor = headEnd
	}
	// Estimated: the raw bytes between the last head line and the first
	// tail line (the middle is never rendered).
	omitted := max(tailCursor-omitCursor, 0)
	var b strings.Builder
	b.WriteString(strings.Join(head, "\n"))
	if len(head) > 0 {
		b.WriteByte('\n')
	}
	b.WriteString(render.OmitMarker(int(omitted), s.id, omitCursor))
	b.WriteByte('\n')
	b.WriteString(strings.Join(tail, "\n"))
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
