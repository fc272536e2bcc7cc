package render

import "strconv"

// A Folder folds runs of identical consecutive lines as they stream through
// (step 5): the first line of a run is passed on at once; when the run ends,
// one further copy is passed on as is, and two or more are replaced by one
// line "[previous line repeated <N> times]" (N = copies removed) whose Cursor
// is that of the first removed copy, End that of the last, and Partial that
// of the last.
//
// The zero value is ready to use. A Folder holds one line and is not safe for
// concurrent use.
type Folder struct {
	prev   string // text of the first line of the current run
	have   bool   // prev is set
	copies int    // further copies of prev seen
	first  Line   // first further copy
	last   Line   // last further copy
}

// Add passes l through the folder, calling emit for each line that is
// decided.
func (f *Folder) Add(l Line, emit func(Line)) {
	if f.have && l.Text == f.prev {
		f.copies++
		if f.copies == 1 {
			f.first = l
		}
		f.last = l
		return
	}
	f.Flush(emit)
	f.prev = l.Text
	f.have = true
	emit(l)
}

// Flush ends the current run, emitting its pending copies or marker. The
// next line added starts a new run even if it equals the last one.
func (f *Folder) Flush(emit func(Line)) {
	switch {
	case f.copies == 1:
		emit(f.first)
	case f.copies >= 2:
		emit(Line{
			Cursor:  f.first.Cursor,
			End:     f.last.End,
			Text:    repeatMarker(f.copies),
			Partial: f.last.Partial,
		})
	}
	f.copies = 0
	f.have = false
	f.prev = ""
	f.first, f.last = Line{}, Line{}
}

func repeatMarker(n int) string {
	return "[previous line repeated " + strconv.Itoa(n) + " times]"
}

// Fold applies repeat folding to a slice of lines and returns a new slice.
func Fold(lines []string) []string {
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && lines[j] == lines[i] {
			j++
		}
		out = append(out, lines[i])
		switch n := j - i - 1; {
		case n == 1:
			out = append(out, lines[i])
		case n >= 2:
			out = append(out, repeatMarker(n))
		}
		i = j
	}
	return out
}
