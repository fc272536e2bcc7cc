package journal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// textBytes returns n bytes of output of the kinds commands print: text
// lines of varied length, colour escapes, progress CRs, sometimes an OSC
// title or a C1 control, sometimes bytes that are not UTF-8.
func textBytes(r *rand.Rand, n int, escapes bool) []byte {
	var b []byte
	for len(b) < n {
		switch k := r.IntN(20); {
		case k < 12:
			for i := r.IntN(120); i > 0; i-- {
				b = append(b, byte('a'+r.IntN(26)))
			}
			b = append(b, '\n')
		case k < 14:
			b = append(b, "\x1b[31merror\x1b[0m: x\r\n"...)
		case k < 15:
			b = append(b, "50%\r100%\n"...)
		case k < 16:
			b = append(b, "\xff\xfe\xc3\n"...)
		case !escapes:
			b = append(b, "plain\n"...)
		case k < 17:
			b = append(b, "\x1b]0;title\x07prompt$ \n"...)
		case k < 18:
			b = append(b, "\x1b]0;title with\nnewline\x07\n"...) // an LF inside a string
		case k < 19:
			b = append(b, "\xc2\x9b1;2m\xc2\x9d8;;x\x1b\\link\n"...)
		default:
			b = append(b, "\x1b[1\n;31m\n"...) // an LF inside a CSI
		}
	}
	return b[:n]
}

// refIndex is the line structure of out computed the slow way.
type refIndex struct {
	lfEnds []int64 // lfEnds[n-1]: the cursor after the n-th LF
	plain  lineState
}

func newRef(out []byte) refIndex {
	var r refIndex
	for i, b := range out {
		if b == '\n' {
			r.lfEnds = append(r.lfEnds, int64(i)+1)
		}
	}
	r.plain.feed(out)
	return r
}

func (r refIndex) linesBefore(c int64) int64 {
	var n int64
	for _, e := range r.lfEnds {
		if e > c {
			break
		}
		n++
	}
	return n
}

// checkIndex compares the line index of dir with the reference for every
// LF kept and a sample of cursors.
func checkIndex(t *testing.T, dir string, out []byte, r *rand.Rand) {
	t.Helper()
	x, err := ReadLineIndex(dir)
	if err != nil {
		t.Fatalf("ReadLineIndex: %v", err)
	}
	info, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	xi := x.Info()
	if xi.End != info.End || xi.HeadEnd != info.HeadEnd || xi.TailStart != info.TailStart || xi.DroppedLines != info.DroppedLines {
		t.Fatalf("index info %+v, Stat %+v", xi, info)
	}
	ref := newRef(out[:info.End])
	kept := func(c int64) bool { return c <= info.HeadEnd || c >= info.TailStart }
	for n, e := range ref.lfEnds {
		if !kept(e - 1) {
			continue
		}
		got, err := x.LineStart(int64(n) + 1)
		if err != nil || got != e {
			t.Fatalf("LineStart(%d) = %d, %v; want %d", n+1, got, err, e)
		}
	}
	for i := 0; i < 200; i++ {
		c := r.Int64N(info.End + 1)
		if !kept(c) {
			if _, err := x.Lines(c); err == nil {
				t.Fatalf("Lines(%d) in the dropped range: no error", c)
			}
			continue
		}
		got, err := x.Lines(c)
		if want := ref.linesBefore(c); err != nil || got != want {
			t.Fatalf("Lines(%d) = %d, %v; want %d", c, got, err, want)
		}
	}
	for _, max := range []int64{0, 100, 1 << 20} {
		want := ref.plain.hazards == 0 && ref.plain.maxRun <= max
		if got := x.Plain(max); got != want {
			t.Fatalf("Plain(%d) = %v, want %v (hazards %d, maxRun %d)", max, got, want, ref.plain.hazards, ref.plain.maxRun)
		}
	}
}

// indexCases are journals of every shape the index must describe: one
// segment, many, a dropped range, checkpoints inside segments.
var indexCases = []struct {
	name  string
	opt   Options
	size  int
	every int64
}{
	{"small", Options{}, 3000, 64 << 10},
	{"segments", Options{SegmentBytes: 4 << 10, MaxBytes: 1 << 30}, 60 << 10, 1 << 10},
	{"capped", Options{SegmentBytes: 4 << 10, MaxBytes: 16 << 10, HeadBytes: 2 << 10}, 80 << 10, 1 << 10},
	{"capped-no-head", Options{SegmentBytes: 4 << 10, MaxBytes: 16 << 10, HeadBytes: -1}, 50 << 10, 700},
}

func writeIndexed(t *testing.T, dir string, opt Options, size int, r *rand.Rand, escapes bool) []byte {
	t.Helper()
	w, err := Create(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for len(out) < size {
		p := textBytes(r, 1+r.IntN(3000), escapes)
		if _, err := w.Append(Stream(1+r.IntN(2)), p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p...)
		if r.IntN(10) == 0 {
			if err := w.AppendInput([]byte("typed\n")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func setIndexEvery(t *testing.T, n int64) {
	old := indexEvery
	indexEvery = n
	t.Cleanup(func() { indexEvery = old })
}

// TestLineIndex checks the index of generated journals against a count
// of their bytes, for every LF and sampled cursors, with and without
// escape hazards.
func TestLineIndex(t *testing.T) {
	for _, tc := range indexCases {
		for _, escapes := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/escapes=%v", tc.name, escapes), func(t *testing.T) {
				setIndexEvery(t, tc.every)
				r := rand.New(rand.NewPCG(uint64(tc.size), 7))
				dir := filepath.Join(t.TempDir(), "j")
				out := writeIndexed(t, dir, tc.opt, tc.size, r, escapes)
				checkIndex(t, dir, out, r)
			})
		}
	}
}

// TestLineIndexDamaged damages the index files in every way a file can be
// damaged (gone, cut at every entry boundary and inside one, a flipped
// byte anywhere, another segment's index) and checks that the index then
// either describes the journal exactly or says it cannot, and that a
// writer resuming the journal rewrites it whole.
func TestLineIndexDamaged(t *testing.T) {
	for _, tc := range indexCases {
		t.Run(tc.name, func(t *testing.T) {
			setIndexEvery(t, tc.every)
			r := rand.New(rand.NewPCG(uint64(tc.size), 9))
			orig := filepath.Join(t.TempDir(), "j")
			out := writeIndexed(t, orig, tc.opt, tc.size, r, false)
			idxs, _ := filepath.Glob(filepath.Join(orig, "*.idx"))
			if len(idxs) == 0 {
				t.Skip("no index file to damage (a short journal has none)")
			}
			type damage struct {
				name string
				do   func(b []byte) []byte
			}
			var damages []damage
			damages = append(damages, damage{"gone", nil})
			damages = append(damages, damage{"empty", func([]byte) []byte { return nil }})
			for _, cut := range []int{ixLen / 2, ixLen, ixLen + 3, 2 * ixLen} {
				damages = append(damages, damage{fmt.Sprintf("cut%d", cut), func(b []byte) []byte { return b[:min(cut, len(b))] }})
			}
			for i := 0; i < 6; i++ {
				damages = append(damages, damage{fmt.Sprintf("flip%d", i), func(b []byte) []byte {
					b = bytes.Clone(b)
					b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
					return b
				}})
			}
			other, _ := os.ReadFile(idxs[len(idxs)/2])
			damages = append(damages, damage{"other", func([]byte) []byte { return other }})
			for _, d := range damages {
				for _, which := range []int{0, len(idxs) / 2, len(idxs) - 1} {
					dir := copyDir(t, orig)
					path := filepath.Join(dir, filepath.Base(idxs[which]))
					if d.do == nil {
						os.Remove(path)
					} else {
						b, _ := os.ReadFile(path)
						os.WriteFile(path, d.do(b), 0o600)
					}
					x, err := ReadLineIndex(dir)
					if err != nil {
						if !errors.Is(err, ErrNoIndex) {
							t.Fatalf("%s %s: %v", d.name, path, err)
						}
					} else {
						_ = x
						checkIndex(t, dir, out, r)
					}
					// A writer resuming the journal rewrites what it can.
					w, err := Create(dir, tc.opt)
					if err != nil {
						t.Fatal(err)
					}
					w.Close()
					if _, err := ReadLineIndex(dir); err != nil && !errors.Is(err, ErrNoIndex) {
						t.Fatalf("%s after resume: %v", d.name, err)
					} else if err == nil {
						checkIndex(t, dir, out, r)
					}
				}
			}
		})
	}
}

// TestLineIndexResumed writes a journal in several writer lifetimes (each
// resuming the last), with index files deleted in between, and checks the
// index after each.
func TestLineIndexResumed(t *testing.T) {
	setIndexEvery(t, 1<<10)
	r := rand.New(rand.NewPCG(3, 3))
	dir := filepath.Join(t.TempDir(), "j")
	opt := Options{SegmentBytes: 4 << 10, MaxBytes: 1 << 30}
	var out []byte
	for life := 0; life < 5; life++ {
		w, err := Create(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			p := textBytes(r, 1+r.IntN(2000), false)
			if _, err := w.Append(Stdout, p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p...)
		}
		w.Close()
		checkIndex(t, dir, out, r)
		idxs, _ := filepath.Glob(filepath.Join(dir, "*.idx"))
		os.Remove(idxs[r.IntN(len(idxs))])
		checkIndex(t, dir, out, r)
	}
}

// TestLineIndexLive reads the index while a writer appends: every
// snapshot describes a prefix of the output exactly.
func TestLineIndexLive(t *testing.T) {
	setIndexEvery(t, 1<<10)
	r := rand.New(rand.NewPCG(5, 5))
	dir := filepath.Join(t.TempDir(), "j")
	w, err := Create(dir, Options{SegmentBytes: 4 << 10, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var out []byte
	for i := 0; i < 100; i++ {
		p := textBytes(r, 1+r.IntN(2000), false)
		if _, err := w.Append(Stdout, p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p...)
		x, err := ReadLineIndex(dir)
		if err != nil {
			t.Fatal(err)
		}
		end := x.Info().End
		ref := newRef(out[:end])
		if n, err := x.Lines(end); err != nil || n != int64(len(ref.lfEnds)) {
			t.Fatalf("Lines(end) = %d, %v; want %d", n, err, len(ref.lfEnds))
		}
	}
}

// BenchmarkLineIndex measures a read of the index (what a log of any
// window pays besides the lines it renders) of a 64 MiB journal against a
// 1 MiB one: the ratio should stay small.
func BenchmarkLineIndex(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		dir := filepath.Join(b.TempDir(), "j")
		w, err := Create(dir, Options{SyncInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 1))
		chunk := textBytes(r, 256<<10, false)
		for n := 0; n < size; n += len(chunk) {
			w.Append(Stdout, chunk)
		}
		w.Close()
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			for b.Loop() {
				x, err := ReadLineIndex(dir)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := x.Lines(x.Info().End)
				if _, err := x.LineStart(n / 2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLineStateFastPath: feeding output in any split gives the state the
// byte-by-byte model gives.
func TestLineStateFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	specials := []byte{0x1B, 0xC2, 0x9B, 0x9D, 0x9C, 0x90, 0x07, 0x18, 0x1A, '[', ']', 'P', 'm', '\n', '\n', 'a', '\\'}
	for i := 0; i < 2000; i++ {
		n := r.IntN(300)
		b := make([]byte, n)
		for j := range b {
			if r.IntN(3) == 0 {
				b[j] = specials[r.IntN(len(specials))]
			} else {
				b[j] = byte('a' + r.IntN(26))
			}
		}
		var slow, fast lineState
		slow.feedSlow(b)
		for p := b; len(p) > 0; {
			k := 1 + r.IntN(len(p))
			fast.feed(p[:k])
			p = p[k:]
		}
		if slow != fast {
			t.Fatalf("%q: fast %+v, slow %+v", b, fast, slow)
		}
	}
}

// TestLineIndexShortOutputNoFile: a journal of less than indexEvery in one
// segment has no index file (one inode per foreground call, not two), and
// its index is rebuilt by a read.
func TestLineIndexShortOutputNoFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "j")
	w, err := Create(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := []byte("one\ntwo\nthree")
	w.Append(Stdout, out)
	w.Close()
	if idx, _ := filepath.Glob(filepath.Join(dir, "*.idx")); len(idx) != 0 {
		t.Fatalf("index files %v for %d bytes", idx, len(out))
	}
	checkIndex(t, dir, out, rand.New(rand.NewPCG(1, 2)))
}
