package render

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// sample returns about 1 MiB of output: plain text lines, with colour codes,
// progress updates and non-ASCII text in every fourth line when mixed.
func sample(mixed bool) []byte {
	rng := rand.New(rand.NewPCG(7, 8))
	var b []byte
	for i := 0; len(b) < 1<<20; i++ {
		if mixed {
			switch i % 16 {
			case 0:
				b = fmt.Appendf(b, "\x1b[1;32m✓\x1b[0m test_%d passed in \x1b[33m%d ms\x1b[0m\n", i, i%997)
				continue
			case 4:
				b = fmt.Appendf(b, "\x1b[31merror\x1b[0m: %s:%d: unexpected token «%c»\n", "src/main.go", i, 'a'+i%26)
				continue
			case 8:
				b = fmt.Appendf(b, "Downloading %3d%%\r\x1b[K%3d%%\r\x1b[K100%%\r\n", i%100, (i+50)%100)
				continue
			case 12:
				b = fmt.Appendf(b, "\x1b]8;;https://example.com/%d\x1b\\link %d\x1b]8;;\x1b\\ ünïcödé text\n", i, i)
				continue
			}
		}
		b = fmt.Appendf(b, "%6d %s\n", i, strings.Repeat("lorem ipsum ", 1+rng.IntN(10)))
	}
	return b
}

func benchRender(b *testing.B, in []byte, opt Options) {
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	n := 0
	count := func(l Line) { n += len(l.Text) }
	for b.Loop() {
		r := New(0, opt)
		// Write in 32 KiB chunks, as a journal reader would.
		for i := 0; i < len(in); i += 32 << 10 {
			r.Write(in[i:min(i+32<<10, len(in))], count)
		}
		r.Flush(count)
	}
	if n == 0 {
		b.Fatal("no output")
	}
}

func BenchmarkRender(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchRender(b, sample(false), Options{}) })
	b.Run("mixed", func(b *testing.B) { benchRender(b, sample(true), Options{}) })
	b.Run("raw", func(b *testing.B) { benchRender(b, sample(true), Options{Raw: true}) })
}

func BenchmarkHeadTail(b *testing.B) {
	in := sample(true)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		h := NewHeadTail(200000)
		var f Folder
		add := func(l Line) { h.Add(l) }
		fold := func(l Line) { f.Add(l, add) }
		r := New(0, Options{})
		r.Write(in, fold)
		r.Flush(fold)
		f.Flush(add)
		_ = h.Excerpt("s")
	}
}
