package engine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/term/render"
)

// genOutput returns at least n bytes of command output. plain output has
// every LF outside escape sequences (colours, progress CRs, titles ended
// before the LF, bytes that are not UTF-8, a C1 CSI); otherwise some LFs
// fall inside an OSC string or a CSI. Lines are up to long bytes.
func genOutput(r *rand.Rand, n int, plain bool, long int) []byte {
	var b []byte
	for len(b) < n {
		switch k := r.IntN(24); {
		case k < 12:
			for i := r.IntN(long); i > 0; i-- {
				b = append(b, byte('a'+r.IntN(26)))
			}
			b = append(b, '\n')
		case k < 14:
			b = append(b, "\x1b[31merror\x1b[0m: x\r\n"...)
		case k < 15:
			b = append(b, "50%\r100%\n"...)
		case k < 16:
			b = append(b, "\xff\xfe\xc3\n\n"...)
		case k < 17:
			b = append(b, "\x1b]0;title\x07prompt$ \x1b[K\n"...)
		case k < 18:
			b = append(b, "\xc2\x9b1;2mbold\xc2\x9b0m\x1b[2K\n"...)
		case k < 19:
			b = append(b, "\x1b[0m\n"...) // a line with no text
		case k < 20:
			b = append(b, "a\tb\bc\x7f\x01\n"...)
		case k < 21:
			b = append(b, "no newline "...)
		case plain:
			b = append(b, "word "...)
		case k < 22:
			b = append(b, "\x1b]0;title with\nnewline\x07\n"...)
		default:
			b = append(b, "\x1b[1\n;31m\n"...)
		}
	}
	return b // whole pieces: a cut escape would put the next LF inside it
}

// logWindows are the windows a test reads: every shape of log call.
func logWindows(total int) []apitype.ProcessParams {
	f := func(v int) *float64 { x := float64(v); return &x }
	var ws []apitype.ProcessParams
	ws = append(ws, apitype.ProcessParams{})
	for _, l := range []int{0, 1, 5, 200, total, total + 3} {
		ws = append(ws, apitype.ProcessParams{Limit: f(l)})
	}
	for _, o := range []int{0, 1, total / 3, total / 2, total - 201, total - 2, total - 1, total, total + 5} {
		if o < 0 {
			continue
		}
		ws = append(ws, apitype.ProcessParams{Offset: f(o)})
		for _, l := range []int{0, 1, 3, 50, 1000} {
			ws = append(ws, apitype.ProcessParams{Offset: f(o), Limit: f(l)})
		}
	}
	return ws
}

// windowText is what a log page shows and says, for comparison.
type windowText struct {
	Lines                []render.Line
	Full                 bool
	Total                int
	End, Skipped, Unread int64
}

func readWindow(t *testing.T, s *session, p apitype.ProcessParams, lm *lineMap, raw bool, maxLine, budget int) windowText {
	t.Helper()
	pg, res, err := logRead(s, p, lm, 0, raw, maxLine, budget, 0)
	if err != nil {
		t.Fatalf("logRead(%s, map %v): %v", showParams(p), lm != nil, err)
	}
	return windowText{pg.window, pg.full, pg.total, res.end, res.skippedBytes, res.unreadable}
}

func showParams(p apitype.ProcessParams) string {
	var b strings.Builder
	if p.Offset != nil {
		fmt.Fprintf(&b, "offset=%v ", *p.Offset)
	}
	if p.Limit != nil {
		fmt.Fprintf(&b, "limit=%v", *p.Limit)
	}
	return b.String()
}

// checkWindows compares every window read through the line map with the
// same window read from the whole journal. It returns whether a map was
// made.
func checkWindows(t *testing.T, dir string, raw bool, maxLine, budget int) bool {
	t.Helper()
	s := newSession("t", dir, "a")
	lm := newLineMap(dir, raw, maxLine, 0)
	if lm == nil {
		return false
	}
	whole := readWindow(t, s, apitype.ProcessParams{}, nil, raw, maxLine, budget)
	if lm.total != whole.Total {
		t.Fatalf("line map counts %d lines, a whole read %d", lm.total, whole.Total)
	}
	for _, p := range logWindows(lm.total) {
		want := readWindow(t, s, p, nil, raw, maxLine, budget)
		got := readWindow(t, s, p, lm, raw, maxLine, budget)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s raw=%v budget=%d: with the line map\n%+v\nwhole read\n%+v", showParams(p), raw, budget, short(got), short(want))
		}
	}
	return true
}

func short(w windowText) string {
	var b strings.Builder
	fmt.Fprintf(&b, "full=%v total=%d end=%d skipped=%d unread=%d lines=%d", w.Full, w.Total, w.End, w.Skipped, w.Unread, len(w.Lines))
	for i, l := range w.Lines {
		if i > 3 && i < len(w.Lines)-3 {
			continue
		}
		fmt.Fprintf(&b, "\n  [%d,%d) %q", l.Cursor, l.End, l.Text)
	}
	return b.String()
}

// lineMapCases are journal shapes: one segment, many (lines spanning
// records and segments), a cap that dropped a range with and without a
// head, a head ending in a partial line.
var lineMapCases = []struct {
	name string
	opt  journal.Options
	size int
}{
	{"small", journal.Options{}, 2000},
	{"segments", journal.Options{SegmentBytes: 4 << 10, MaxBytes: 1 << 30}, 40 << 10},
	{"capped", journal.Options{SegmentBytes: 4 << 10, MaxBytes: 16 << 10, HeadBytes: 2 << 10}, 60 << 10},
	{"capped-no-head", journal.Options{SegmentBytes: 4 << 10, MaxBytes: 16 << 10, HeadBytes: -1}, 60 << 10},
}

func writeJournal(t testing.TB, dir string, opt journal.Options, size int, r *rand.Rand, plain bool, long int) {
	t.Helper()
	opt.SyncInterval = -1
	w, err := journal.Create(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < size; {
		p := genOutput(r, 1+r.IntN(1500), plain, long)
		if _, err := w.Append(journal.Stream(1+r.IntN(2)), p); err != nil {
			t.Fatal(err)
		}
		n += len(p)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLineMapMatchesWholeRead: for generated journals of every shape, in
// rendered and raw mode, with a budget that cuts pages and one that does
// not, every log window read through the line index equals the same
// window read from the whole journal. Journals with an LF inside an
// escape sequence, or lines long enough to be broken, get no map.
func TestLineMapMatchesWholeRead(t *testing.T) {
	for _, tc := range lineMapCases {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/%d", tc.name, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, uint64(tc.size)))
				// A budget that cuts pages, with lines short enough
				// not to be broken at it, and one that does not.
				for _, budget := range []int{600, 1 << 20} {
					dir := filepath.Join(t.TempDir(), "j")
					writeJournal(t, dir, tc.opt, tc.size, r, true, min(budget/20, 150))
					for _, raw := range []bool{false, true} {
						if !checkWindows(t, dir, raw, min(budget, render.DefaultMaxLineBytes), budget) {
							t.Fatalf("no line map for a plain journal (raw=%v budget=%d)", raw, budget)
						}
					}
				}
			})
		}
	}
	t.Run("hazards", func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 9))
		dir := filepath.Join(t.TempDir(), "j")
		writeJournal(t, dir, journal.Options{SegmentBytes: 4 << 10}, 20<<10, r, false, 150)
		if newLineMap(dir, false, 1<<20, 0) != nil {
			t.Fatal("a line map for a journal with LFs inside escape sequences")
		}
	})
	t.Run("long-lines", func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 9))
		dir := filepath.Join(t.TempDir(), "j")
		writeJournal(t, dir, journal.Options{SegmentBytes: 4 << 10}, 20<<10, r, true, 2000)
		if newLineMap(dir, false, 300, 0) != nil {
			t.Fatal("a line map for lines the renderer breaks")
		}
		if !checkWindows(t, dir, false, 1<<20, 1<<20) {
			t.Fatal("no line map when no line is broken")
		}
	})
}

// TestLineMapDamagedIndex: an index file truncated, emptied, bit-flipped,
// replaced by another segment's or deleted never changes what log shows:
// the windows equal the whole read (or there is no map).
func TestLineMapDamagedIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	orig := filepath.Join(t.TempDir(), "j")
	writeJournal(t, orig, journal.Options{SegmentBytes: 4 << 10, MaxBytes: 24 << 10, HeadBytes: 4 << 10}, 80<<10, r, true, 150)
	idxs, _ := filepath.Glob(filepath.Join(orig, "*.idx"))
	if len(idxs) < 3 {
		t.Fatalf("index files: %v", idxs)
	}
	other, _ := os.ReadFile(idxs[1])
	damages := map[string]func([]byte) []byte{
		"gone":  nil,
		"empty": func([]byte) []byte { return nil },
		"cut":   func(b []byte) []byte { return b[:len(b)/2] },
		"flip":  func(b []byte) []byte { b[r.IntN(len(b))] ^= 0x10; return b },
		"other": func([]byte) []byte { return other },
	}
	for name, do := range damages {
		for which := range idxs {
			dir := filepath.Join(t.TempDir(), "j")
			copyTree(t, orig, dir)
			path := filepath.Join(dir, filepath.Base(idxs[which]))
			if do == nil {
				os.Remove(path)
			} else {
				b, _ := os.ReadFile(path)
				os.WriteFile(path, do(b), 0o600)
			}
			t.Logf("%s %s: map %v", name, filepath.Base(path), checkWindows(t, dir, false, 1<<20, 1<<20))
		}
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	os.MkdirAll(to, 0o700)
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(to, e.Name()), b, 0o600)
	}
}

// benchJournal writes size bytes of build-log-like output (80-byte lines,
// some coloured) to a journal with the default options.
func benchJournal(b *testing.B, size int) string {
	dir := filepath.Join(b.TempDir(), "j")
	w, err := journal.Create(dir, journal.Options{SyncInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	var chunk []byte
	for i := 0; len(chunk) < 256<<10; i++ {
		if i%10 == 0 {
			chunk = fmt.Appendf(chunk, "\x1b[32mok\x1b[0m  pkg/%05d  %s\n", i, strings.Repeat("x", 58))
		} else {
			chunk = fmt.Appendf(chunk, "compiling unit %07d of the project ... %s\n", i, strings.Repeat("y", 33))
		}
	}
	for n := 0; n < size; n += len(chunk) {
		if _, err := w.Append(journal.Stdout, chunk); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	return dir
}

// BenchmarkLog is process log on a 1 MiB journal and on one at the 64
// MiB cap (the head, the dropped range, the tail): the last 200 lines and
// a window of 200 in the middle, with the line index and without (a whole
// read, what log did before). Compare the 64MiB and 1MiB lines of one
// run: with the index they cost about the same.
func BenchmarkLog(b *testing.B) {
	e := newEngine(b)
	f := func(v int) *float64 { x := float64(v); return &x }
	for _, size := range []int{1 << 20, 100 << 20} {
		dir := benchJournal(b, size)
		s := newSession("bench", dir, "a")
		total := e.logAction(s, apitype.ProcessParams{}).Details.(*apitype.LogDetails).Total
		windows := map[string]apitype.ProcessParams{
			"tail200":   {},
			"middle200": {Offset: f(total / 2), Limit: f(200)},
		}
		label := "1MiB"
		if size > 64<<20 {
			label = "64MiB-cap"
		}
		for _, name := range []string{"tail200", "middle200"} {
			p := windows[name]
			for _, indexed := range []bool{true, false} {
				b.Run(fmt.Sprintf("%s/%s/index=%v", name, label, indexed), func(b *testing.B) {
					noLineMap = !indexed
					defer func() { noLineMap = false }()
					for b.Loop() {
						r := e.logAction(s, p)
						if d := r.Details.(*apitype.LogDetails); d.Total != total {
							b.Fatalf("total %d, want %d", d.Total, total)
						}
					}
				})
			}
		}
	}
}
