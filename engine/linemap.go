package engine

import (
	"errors"
	"unicode/utf8"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/term/render"
)

// lineMap numbers the rendered lines of a session's journal (what log's
// offset counts) from the journal's line index, rendering only the lines
// at the edges of the kept ranges, so that a log of any window costs
// about the window, not the journal.
//
// It exists only for a plain journal (journal.LineIndex.Plain): every LF
// written outside escape sequences and no line long enough for the
// renderer to break. Then a rendered line is exactly the bytes after an
// LF up to the next one, and a renderer started just after an LF renders
// what one started at cursor 0 does, so the rendered lines are, in order:
// the head's lines (one per LF, and the head's last partial line if it
// renders any text), the dropped-range marker (if a head was kept), the
// tail's lines (its first one from TailStart, rendered as a read that
// starts there does), and the last partial line if it renders any text.
// A journal that is not plain, damaged, whose end is lost, or read with
// a stream filter has no map: log reads it whole.
type lineMap struct {
	ix      *journal.LineIndex
	info    journal.Info
	dropped bool
	headLF  int64 // LF bytes before HeadEnd
	headPar bool  // the head ends in a partial line with text
	marker  bool  // the dropped-range marker is a line
	tailLF0 int64 // LF bytes before TailStart (dropped ones included)
	total   int   // rendered lines, the marker included
}

// noLineMap turns the line map off (for benchmarks against the whole read).
var noLineMap bool

// newLineMap returns the map of the journal in dir as log renders it (raw
// or not, lines broken at maxLine bytes), or nil if there is none.
// outputEnd is how much output the session recorded, if it ended.
func newLineMap(dir string, raw bool, maxLine int, outputEnd int64) *lineMap {
	if noLineMap {
		return nil
	}
	ix, err := journal.ReadLineIndex(dir)
	if err != nil {
		return nil
	}
	info := ix.Info()
	// A rendered line holds at most 3 bytes (U+FFFD) per raw byte.
	if outputEnd > info.End || !ix.Plain(int64(max(maxLine, 4))/3) {
		return nil
	}
	m := &lineMap{ix: ix, info: info, dropped: info.DroppedBytes > 0}
	endLF, err := ix.Lines(info.End)
	if err != nil {
		return nil
	}
	partial := func(from, to int64, exact bool) (bool, bool) {
		if from >= to {
			return false, true
		}
		n := 0
		res, err := readLines(dir, readOpts{since: from, until: to, exact: exact, raw: raw, maxLine: maxLine}, func(render.Line) { n++ })
		return n == 1, err == nil && n <= 1 && res.unreadable == 0
	}
	lastStart, err := ix.LineStart(endLF)
	if err != nil {
		return nil
	}
	if !m.dropped {
		par, ok := partial(lastStart, info.End, true)
		if !ok {
			return nil
		}
		m.total = int(endLF) + b2i(par)
		return m
	}
	if info.HeadEnd > 0 { // else no head was kept: no lines before it
		if m.headLF, err = ix.Lines(info.HeadEnd); err != nil {
			return nil
		}
	}
	if m.tailLF0, err = ix.Lines(info.TailStart); err != nil {
		return nil
	}
	headLast, err := ix.LineStart(m.headLF)
	if err != nil {
		return nil
	}
	var ok bool
	if m.headPar, ok = partial(headLast, info.HeadEnd, true); !ok {
		return nil
	}
	m.marker = info.HeadEnd > 0
	var tailPar bool
	if endLF > m.tailLF0 {
		tailPar, ok = partial(lastStart, info.End, true)
	} else {
		tailPar, ok = partial(info.TailStart, info.End, false)
	}
	if !ok {
		return nil
	}
	m.total = int(m.headLF) + b2i(m.headPar) + b2i(m.marker) + int(endLF-m.tailLF0) + b2i(tailPar)
	return m
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// seek returns where a read that delivers rendered line k (k < total)
// starts: the cursor, the number of the first line it delivers (at most
// k) and whether the cursor is a line start (exact) or the start of the
// tail (read as after the dropped range).
func (m *lineMap) seek(k int) (cursor int64, line int, exact bool, ok bool) {
	kk := int64(k)
	if !m.dropped || kk < m.headLF+int64(b2i(m.headPar)+b2i(m.marker)) {
		if m.dropped {
			kk = min(kk, m.headLF)
		}
		c, err := m.ix.LineStart(kk)
		if err != nil {
			return 0, 0, false, false
		}
		if m.dropped && c == m.info.HeadEnd && m.marker {
			// A read from the end of the head would start at the
			// tail and not see the marker: start a line earlier.
			kk--
			if c, err = m.ix.LineStart(kk); err != nil {
				return 0, 0, false, false
			}
		}
		return c, int(kk), true, true
	}
	j := kk - (m.headLF + int64(b2i(m.headPar)+b2i(m.marker)))
	if j == 0 {
		return m.info.TailStart, k, false, true
	}
	c, err := m.ix.LineStart(m.tailLF0 + j)
	if err != nil {
		return 0, 0, false, false
	}
	return c, k, true, true
}

// errLineMap says a read planned from the line map did not come out as the
// map said: the caller reads again without it.
var errLineMap = errors.New("line map disagrees with the journal")

// logPage is the window a log read kept and its counts.
type logPage struct {
	window     []render.Line
	winChars   int  // code points of the window's lines joined by "\n"
	full       bool // a forward page ran out of budget
	total      int
	totalChars int
}

// logRead reads the lines of a log page: with lm, only from the first line
// of the window on (and a forward window stops at its end), its totals
// from lm; without, the whole journal from since. It fails with
// errLineMap if lm's numbering and the read disagree.
func logRead(s *session, p apitype.ProcessParams, lm *lineMap, since int64, raw bool, maxLine, budget int, outputEnd int64) (logPage, readResult, error) {
	pg := &logPage{}
	w := pg.windowOf(p, budget)
	o := readOpts{since: since, raw: raw, stream: streamOf(p.Stream), outputEnd: outputEnd, maxLine: maxLine, done: func() bool { return pg.full }}
	count := func(l render.Line) {
		pg.total++
		pg.totalChars += utf8.RuneCountInString(l.Text)
		w.keep(l)
	}
	if lm == nil {
		// A forward page that is full stops reading: its cost is the
		// page's, not the rest of the journal's (its totals then count
		// the lines read).
		res, err := readLines(s.journal(), o, count)
		return *pg, res, err
	}
	res, err := pg.readMapped(s, p, lm, o, w, count)
	return *pg, res, err
}

// logWindow is which lines a log page keeps: keep is called with every
// line read; first is the window's first line (negative: counted from
// the end), hi the line after its last (-1: none), lastN > 0 for a tail
// of the last lastN lines.
type logWindow struct {
	keep      func(render.Line)
	first, hi int
	lastN     int
}

// lineChars is the code points a line adds to a page: its text, and the
// separator before it unless it is the first.
func lineChars(l render.Line, first bool) int {
	k := utf8.RuneCountInString(l.Text)
	if !first {
		k++
	}
	return k
}

// add appends l to the page unless the budget is spent (then the page
// is full).
func (pg *logPage) add(l render.Line, budget int) {
	if pg.full {
		return
	}
	k := lineChars(l, len(pg.window) == 0)
	if len(pg.window) > 0 && pg.winChars+k > budget {
		pg.full = true
		return
	}
	pg.window = append(pg.window, l)
	pg.winChars += k
}

// windowOf is the window of p's since, offset and limit.
func (pg *logPage) windowOf(p apitype.ProcessParams, budget int) logWindow {
	num := func(f *float64) int { return int(cursorArg(*f)) }
	add := func(l render.Line) { pg.add(l, budget) }
	w := logWindow{keep: add, hi: -1}
	switch {
	case p.Since != nil:
		if p.Limit != nil {
			lim := num(p.Limit)
			w.keep = func(l render.Line) {
				if len(pg.window) < lim {
					add(l)
				}
			}
		}
	case p.Offset == nil && p.Limit == nil:
		w.lastN = 200
	case p.Offset == nil:
		w.lastN = num(p.Limit)
		if w.lastN == 0 {
			w.keep = func(render.Line) {}
		}
	default:
		o := num(p.Offset)
		w.first = o
		if p.Limit != nil {
			w.hi = o + num(p.Limit) // both ≤ 2^53: no overflow
		}
		hi := w.hi
		w.keep = func(l render.Line) {
			if pg.total-1 >= o && (hi < 0 || pg.total-1 < hi) {
				add(l)
			}
		}
	}
	if w.lastN > 0 {
		w.first = -w.lastN
		w.keep = pg.tailKeeper(w.lastN, budget)
	}
	return w
}

// tailKeeper keeps the last lastN lines that fit in budget.
func (pg *logPage) tailKeeper(lastN, budget int) func(render.Line) {
	return func(l render.Line) {
		// winChars counts each line with a separator here: the
		// joined text is winChars−1.
		pg.window = append(pg.window, l)
		pg.winChars += lineChars(l, false)
		drop := 0
		for len(pg.window)-drop > 1 && (len(pg.window)-drop > lastN || pg.winChars-1 > budget) {
			pg.winChars -= lineChars(pg.window[drop], false)
			drop++
		}
		pg.window = pg.window[drop:]
		if cap(pg.window) > 2*len(pg.window)+256 {
			pg.window = append(pg.window[:0:0], pg.window...)
		}
	}
}

// readMapped reads the window from the line map: start at the window's
// first line (a tail's is counted from the end), stop at its end.
func (pg *logPage) readMapped(s *session, p apitype.ProcessParams, lm *lineMap, o readOpts, w logWindow, count func(render.Line)) (readResult, error) {
	first, hi := w.first, w.hi
	if first < 0 {
		first = max(lm.total+first, 0)
	}
	if w.lastN == 0 && p.Offset == nil {
		first = lm.total // limit 0: nothing to read
	}
	res := readResult{end: lm.info.End}
	if lm.info.DroppedBytes > 0 && lm.info.HeadEnd == 0 {
		res.skippedBytes = lm.info.DroppedBytes // as a read from 0 reports it
	}
	if first >= lm.total || hi >= 0 && hi <= first {
		pg.total = lm.total
		return res, nil
	}
	cursor, line, exact, ok := lm.seek(first)
	if !ok {
		return res, errLineMap
	}
	pg.total = line
	o.since, o.exact, o.until, o.outputEnd = cursor, exact, lm.info.End, 0
	o.done = func() bool { return pg.full || hi >= 0 && pg.total >= hi }
	r, err := readLines(s.journal(), o, count)
	if err != nil {
		return res, err
	}
	if r.unreadable > 0 {
		return res, errLineMap
	}
	switch {
	case pg.full:
		// Counts and end where the page stopped, as a whole read's.
		res.end = r.end
	case hi >= 0 && pg.total >= hi:
		pg.total = lm.total
	case pg.total != lm.total:
		return res, errLineMap
	}
	return res, nil
}
