package journal

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
)

// output is what a test wrote: the bytes and the stream of each Append.
type output struct {
	data []byte
	runs []run
}

// run is the bytes of one Append call: [previous end, end).
type run struct {
	end int64
	s   Stream
}

func (o *output) add(s Stream, p []byte) {
	o.data = append(o.data, p...)
	o.runs = append(o.runs, run{int64(len(o.data)), s})
}

// runAt returns the run holding byte pos.
func (o *output) runAt(pos int64) run {
	i := sort.Search(len(o.runs), func(i int) bool { return o.runs[i].end > pos })
	return o.runs[i]
}

// truncate forgets the bytes from n on.
func (o *output) truncate(n int64) {
	o.data = o.data[:n]
	i := sort.Search(len(o.runs), func(i int) bool { return o.runs[i].end >= n })
	o.runs = o.runs[:i+1]
	o.runs[i].end = n
}

func (o *output) append(t testing.TB, w *Writer, s Stream, p []byte) {
	t.Helper()
	end, err := w.Append(s, p)
	if err != nil {
		t.Fatal(err)
	}
	o.add(s, p)
	if end != int64(len(o.data)) {
		t.Fatalf("Append end = %d, want %d", end, len(o.data))
	}
}

// randBytes returns n pseudo-random bytes with a newline about every 64.
func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
		if b[i] < 4 {
			b[i] = '\n'
		}
	}
	return b
}

// collected is what a read delivered.
type collected struct {
	chunks []Chunk // Data copied
	data   []byte  // output bytes
	end    int64
}

func collect(t testing.TB, dir string, since int64) collected {
	t.Helper()
	var c collected
	end, err := Read(dir, since, c.add)
	if err != nil {
		t.Fatalf("Read(%d): %v", since, err)
	}
	c.end = end
	return c
}

func (c *collected) add(ch Chunk) error {
	ch.Data = bytes.Clone(ch.Data)
	c.chunks = append(c.chunks, ch)
	if ch.Stream != Input {
		c.data = append(c.data, ch.Data...)
	}
	return nil
}

// checkChunks checks that the output chunks are contiguous from start
// (allowing a jump to tailStart at headEnd) and match want.
func checkChunks(t *testing.T, c collected, want *output, start, headEnd, tailStart int64) {
	t.Helper()
	pos := start
	for i, ch := range c.chunks {
		if ch.Stream == Input {
			continue
		}
		if ch.Cursor != pos {
			if pos == headEnd && ch.Cursor == tailStart {
				pos = tailStart
			} else {
				t.Fatalf("chunk %d at %d, want %d", i, ch.Cursor, pos)
			}
		}
		if len(ch.Data) == 0 {
			t.Fatalf("chunk %d at %d is empty", i, ch.Cursor)
		}
		end := ch.Cursor + int64(len(ch.Data))
		if !bytes.Equal(ch.Data, want.data[ch.Cursor:end]) {
			t.Fatalf("chunk %d at %d: data differs", i, ch.Cursor)
		}
		// A record holds bytes of one Append call.
		if r := want.runAt(ch.Cursor); r.s != ch.Stream || r.end < end {
			t.Fatalf("chunk %d [%d, %d) %v: written as %v up to %d", i, ch.Cursor, end, ch.Stream, r.s, r.end)
		}
		pos = end
	}
}

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	w, err := Create(dir, Options{SegmentBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := rand.New(rand.NewPCG(1, 2))
	var want output
	for i := range 300 {
		s := Stdout
		if r.IntN(3) == 0 {
			s = Stderr
		}
		n := 1 + r.IntN(2000)
		if i%50 == 0 {
			n = 150 << 10 // split into records and segments
		}
		want.append(t, w, s, randBytes(r, n))
	}
	total := int64(len(want.data))
	if got := w.Cursor(); got != total {
		t.Fatalf("Cursor = %d, want %d", got, total)
	}

	for _, since := range []int64{0, 1, 7, 1000, 65535, 65536, 100001, total / 2, total - 1, total} {
		c := collect(t, dir, since)
		if !bytes.Equal(c.data, want.data[since:]) {
			t.Fatalf("Read(%d): got %d bytes, want %d", since, len(c.data), total-since)
		}
		if c.end != total {
			t.Fatalf("Read(%d) end = %d, want %d", since, c.end, total)
		}
		checkChunks(t, c, &want, since, 0, 0)
		if since < total && c.chunks[0].Cursor != since {
			t.Fatalf("Read(%d) first chunk at %d", since, c.chunks[0].Cursor)
		}
	}

	// Beyond the end: nothing, and the end.
	c := collect(t, dir, total+100)
	if len(c.chunks) != 0 || c.end != total {
		t.Fatalf("Read(beyond) = %d chunks, end %d; want 0, %d", len(c.chunks), c.end, total)
	}
	// Negative means 0.
	c = collect(t, dir, -5)
	if !bytes.Equal(c.data, want.data) || c.chunks[0].Cursor != 0 {
		t.Fatal("Read(-5) differs from Read(0)")
	}

	info, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.End != total || info.DroppedBytes != 0 || info.HeadEnd != info.TailStart || info.Segments < 10 {
		t.Fatalf("Stat = %+v", info)
	}
	if wi := w.Stat(); wi != info {
		t.Fatalf("Writer.Stat = %+v, Stat = %+v", wi, info)
	}

	// ReadTail.
	for _, n := range []int64{1, 100, 70000, total, total + 5} {
		var c collected
		start, end, err := ReadTail(dir, n, c.add)
		if err != nil {
			t.Fatal(err)
		}
		wantStart := max(total-n, 0)
		if start != wantStart || end != total || !bytes.Equal(c.data, want.data[wantStart:]) {
			t.Fatalf("ReadTail(%d) = %d, %d, %d bytes; want %d, %d", n, start, end, len(c.data), wantStart, total)
		}
	}
	start, end, err := ReadTail(dir, 0, func(Chunk) error { t.Fatal("chunk for n=0"); return nil })
	if err != nil || start != total || end != total {
		t.Fatalf("ReadTail(0) = %d, %d, %v", start, end, err)
	}
}

func TestSegmentFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	w, err := Create(dir, Options{SegmentBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append(Stdout, make([]byte, 100<<10)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", fi.Mode().Perm())
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Each segment has its line index next to it (the first one's is
	// written once it is full).
	if len(ents) < 14 || ents[0].Name() != "000001.idx" || ents[1].Name() != "000001.seg" {
		t.Fatalf("files: %v", ents)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
		if fi.Size() > 16<<10 {
			t.Errorf("%s is %d bytes, more than SegmentBytes", e.Name(), fi.Size())
		}
	}
}

func TestCap(t *testing.T) {
	const (
		maxBytes = 2 << 20
		head     = 512 << 10
		seg      = 128 << 10
	)
	dir := t.TempDir()
	w, err := Create(dir, Options{MaxBytes: maxBytes, HeadBytes: head, SegmentBytes: seg})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	var want output
	for len(want.data) < 10<<20 {
		want.append(t, w, Stream(1+r.IntN(2)), randBytes(r, 1+r.IntN(40<<10)))
	}
	total := int64(len(want.data))

	check := func(info Info) {
		t.Helper()
		if info.End != total || info.HeadEnd != head {
			t.Fatalf("info %+v: want End %d, HeadEnd %d", info, total, head)
		}
		if info.TailStart <= info.HeadEnd || info.DroppedBytes != info.TailStart-info.HeadEnd {
			t.Fatalf("info %+v: bad gap", info)
		}
		if kept := info.HeadEnd + info.End - info.TailStart; kept > maxBytes || kept < maxBytes-2*seg {
			t.Fatalf("info %+v: kept %d bytes, want (%d, %d]", info, kept, maxBytes-2*seg, maxBytes)
		}
		if lines := int64(bytes.Count(want.data[info.HeadEnd:info.TailStart], []byte{'\n'})); info.DroppedLines != lines {
			t.Fatalf("DroppedLines = %d, want %d", info.DroppedLines, lines)
		}
		if info.Bytes > maxBytes+maxBytes/50 {
			t.Fatalf("journal uses %d bytes on disk", info.Bytes)
		}
	}
	info, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	check(info)
	if wi := w.Stat(); wi != info {
		t.Fatalf("Writer.Stat = %+v, Stat = %+v", wi, info)
	}

	// Head exact, then the tail exact.
	c := collect(t, dir, 0)
	checkChunks(t, c, &want, 0, info.HeadEnd, info.TailStart)
	wantKept := append(bytes.Clone(want.data[:head]), want.data[info.TailStart:]...)
	if !bytes.Equal(c.data, wantKept) {
		t.Fatalf("Read(0): %d bytes, want %d", len(c.data), len(wantKept))
	}
	// A since in the gap starts at TailStart.
	for _, since := range []int64{head, head + 1, info.TailStart - 1} {
		c = collect(t, dir, since)
		if c.chunks[0].Cursor != info.TailStart || !bytes.Equal(c.data, want.data[info.TailStart:]) {
			t.Fatalf("Read(%d) starts at %d", since, c.chunks[0].Cursor)
		}
	}
	c = collect(t, dir, head-10)
	if !bytes.Equal(c.data, append(bytes.Clone(want.data[head-10:head]), want.data[info.TailStart:]...)) {
		t.Fatal("Read(head-10) differs")
	}

	// ReadTail within the tail, and reaching back into the head.
	tailLen := info.End - info.TailStart
	for _, n := range []int64{10, tailLen, tailLen + 100, tailLen + head, tailLen + head + 1} {
		var c collected
		start, end, err := ReadTail(dir, n, c.add)
		if err != nil {
			t.Fatal(err)
		}
		var wantData []byte
		wantStart := total - n
		if n > tailLen {
			wantStart = max(head-(n-tailLen), 0)
			wantData = append(bytes.Clone(want.data[wantStart:head]), want.data[info.TailStart:]...)
		} else {
			wantData = want.data[wantStart:]
		}
		if start != wantStart || end != total || !bytes.Equal(c.data, wantData) {
			t.Fatalf("ReadTail(%d) = %d, %d, %d bytes; want %d, %d, %d bytes", n, start, end, len(c.data), wantStart, total, len(wantData))
		}
	}

	// A restarted writer keeps the gap and goes on.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = Create(dir, Options{MaxBytes: maxBytes, HeadBytes: 4 << 10, SegmentBytes: seg})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if wi := w.Stat(); wi != info {
		t.Fatalf("after restart Writer.Stat = %+v, want %+v", wi, info)
	}
	for range 100 {
		want.append(t, w, Stdout, randBytes(r, 20<<10))
	}
	total = int64(len(want.data))
	if info, err = Stat(dir); err != nil {
		t.Fatal(err)
	}
	check(info)
	c = collect(t, dir, 0)
	checkChunks(t, c, &want, 0, info.HeadEnd, info.TailStart)
}

func TestHeadOnly(t *testing.T) {
	// Output shorter than the head is never dropped, and HeadEnd is the end.
	dir := t.TempDir()
	w, err := Create(dir, Options{MaxBytes: 64 << 10, SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append(Stdout, []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	info, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if (info != Info{End: 6, HeadEnd: 6, TailStart: 6, Segments: 1, Bytes: info.Bytes}) {
		t.Fatalf("Stat = %+v", info)
	}
	// No head: everything but the newest segments goes.
	dir2 := t.TempDir()
	w2, err := Create(dir2, Options{MaxBytes: 64 << 10, HeadBytes: -1, SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	var want output
	for range 100 {
		want.append(t, w2, Stdout, bytes.Repeat([]byte("0123456789abcde\n"), 100))
	}
	info, err = Stat(dir2)
	if err != nil {
		t.Fatal(err)
	}
	if info.HeadEnd != 0 || info.DroppedBytes != info.TailStart || info.DroppedLines != info.TailStart/16 || info.End-info.TailStart > 64<<10 {
		t.Fatalf("Stat = %+v", info)
	}
	c := collect(t, dir2, 0)
	if c.chunks[0].Cursor != info.TailStart || !bytes.Equal(c.data, want.data[info.TailStart:]) {
		t.Fatal("tail differs")
	}
}

// lastSegment returns the path of the newest segment in dir.
func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	seqs, err := listSegments(dir)
	if err != nil || len(seqs) == 0 {
		t.Fatalf("no segments: %v", err)
	}
	return filepath.Join(dir, segName(seqs[len(seqs)-1]))
}

func TestTornTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, size int64)
	}{
		{"truncated payload", func(t *testing.T, path string, size int64) {
			if err := os.Truncate(path, size-10); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated header", func(t *testing.T, path string, size int64) {
			if err := os.Truncate(path, size-int64(overhead+100)+5); err != nil {
				t.Fatal(err)
			}
		}},
		{"bad crc", func(t *testing.T, path string, size int64) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0xff}, size-50); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage length", func(t *testing.T, path string, size int64) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0x7f}, size-int64(overhead+100)+2); err != nil {
				t.Fatal(err)
			}
		}},
		{"zeros appended", func(t *testing.T, path string, size int64) {
			f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(make([]byte, 4096)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := Create(dir, Options{SegmentBytes: 8 << 10})
			if err != nil {
				t.Fatal(err)
			}
			var want output
			r := rand.New(rand.NewPCG(5, 6))
			for range 30 {
				want.append(t, w, Stdout, randBytes(r, 700))
			}
			// The last record is 100 bytes.
			want.append(t, w, Stderr, randBytes(r, 100))
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			path := lastSegment(t, dir)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			damaged := tc.name != "zeros appended"
			tc.damage(t, path, fi.Size())
			valid := int64(len(want.data))
			if damaged {
				valid -= 100
			}

			// Readers stop cleanly at the last valid record.
			c := collect(t, dir, 0)
			if c.end != valid || !bytes.Equal(c.data, want.data[:valid]) {
				t.Fatalf("Read: end %d, %d bytes; want %d", c.end, len(c.data), valid)
			}
			info, err := Stat(dir)
			if err != nil || info.End != valid {
				t.Fatalf("Stat = %+v, %v; want End %d", info, err, valid)
			}

			// The writer resumes there.
			w, err = Create(dir, Options{SegmentBytes: 8 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if w.Cursor() != valid {
				t.Fatalf("resumed at %d, want %d", w.Cursor(), valid)
			}
			want.truncate(valid)
			for range 20 {
				want.append(t, w, Stdout, randBytes(r, 900))
			}
			c = collect(t, dir, 0)
			if !bytes.Equal(c.data, want.data) {
				t.Fatal("data after resume differs")
			}
			checkChunks(t, c, &want, 0, 0, 0)
		})
	}
}

func TestTornNewSegment(t *testing.T) {
	// The writer died right after creating a segment: the empty or torn
	// segment is ignored by readers and replaced by Create.
	for _, size := range []int{0, 10, segRecordLen - 1} {
		dir := t.TempDir()
		w, err := Create(dir, Options{SegmentBytes: 8 << 10})
		if err != nil {
			t.Fatal(err)
		}
		var want output
		want.append(t, w, Stdout, bytes.Repeat([]byte("x\n"), 10000))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		last := lastSegment(t, dir)
		seq, _ := parseSegName(filepath.Base(last))
		b, err := os.ReadFile(last)
		if err != nil {
			t.Fatal(err)
		}
		next := filepath.Join(dir, segName(seq+1))
		if err := os.WriteFile(next, b[:size], 0o600); err != nil {
			t.Fatal(err)
		}
		c := collect(t, dir, 0)
		if !bytes.Equal(c.data, want.data) {
			t.Fatalf("size %d: Read differs", size)
		}
		if c = collect(t, dir, 19000); !bytes.Equal(c.data, want.data[19000:]) {
			t.Fatalf("size %d: Read(19000) differs", size)
		}
		if info, err := Stat(dir); err != nil || info.End != 20000 {
			t.Fatalf("size %d: Stat = %+v, %v", size, info, err)
		}
		w, err = Create(dir, Options{SegmentBytes: 8 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if w.Cursor() != 20000 {
			t.Fatalf("size %d: resumed at %d", size, w.Cursor())
		}
		want.append(t, w, Stdout, []byte("more"))
		w.Close()
		if c = collect(t, dir, 0); !bytes.Equal(c.data, want.data) {
			t.Fatalf("size %d: Read after resume differs", size)
		}
	}
}

func TestConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	// Small segments and a cap, so segments are created and deleted while
	// readers run.
	w, err := Create(dir, Options{MaxBytes: 1 << 20, HeadBytes: 64 << 10, SegmentBytes: 16 << 10, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	var want output
	for len(want.data) < 6<<20 {
		want.add(Stream(1+r.IntN(2)), randBytes(r, 1+r.IntN(8<<10)))
	}
	total := int64(len(want.data))

	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		var pos int64
		for _, run := range want.runs {
			if _, err := w.Append(run.s, want.data[pos:run.end]); err != nil {
				t.Error(err)
				return
			}
			pos = run.end
		}
	})

	// A follower reads from the cursor it got last. It must see every byte
	// exactly once, apart from what the cap drops before it gets there.
	follow := func() {
		var since, got, skipped int64
		for {
			finished := false
			select {
			case <-done:
				finished = true
			default:
			}
			end, err := Read(dir, since, func(c Chunk) error {
				if c.Cursor < since {
					t.Errorf("chunk at %d before since %d", c.Cursor, since)
				}
				skipped += c.Cursor - since
				end := c.Cursor + int64(len(c.Data))
				if !bytes.Equal(c.Data, want.data[c.Cursor:end]) {
					t.Errorf("chunk at %d differs", c.Cursor)
				}
				if want.runAt(c.Cursor).s != c.Stream {
					t.Errorf("chunk at %d: stream %v", c.Cursor, c.Stream)
				}
				got += int64(len(c.Data))
				since = end
				return nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			if end < since {
				t.Errorf("end %d < since %d", end, since)
				return
			}
			since = end
			if finished && since == total {
				break
			}
		}
		if got+skipped != total {
			t.Errorf("follower got %d + skipped %d bytes, want %d", got, skipped, total)
		}
	}
	for range 2 {
		wg.Go(follow)
	}
	// Independent snapshot reads: Stat, ReadTail and a read from 0 agree
	// with what was written.
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			info, err := Stat(dir)
			if err != nil {
				t.Error(err)
				return
			}
			if info.End > total || info.HeadEnd+info.End-info.TailStart > 1<<20 {
				t.Errorf("Stat = %+v", info)
			}
			var c collected
			start, end, err := ReadTail(dir, 100<<10, c.add)
			if err != nil {
				t.Error(err)
				return
			}
			if end < info.End || int64(len(c.data)) > 100<<10 {
				t.Errorf("ReadTail = %d, %d, %d bytes after Stat %+v", start, end, len(c.data), info)
			}
			for _, ch := range c.chunks {
				if !bytes.Equal(ch.Data, want.data[ch.Cursor:ch.Cursor+int64(len(ch.Data))]) {
					t.Errorf("ReadTail chunk at %d differs", ch.Cursor)
				}
			}
		}
	})
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestBinary(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var want output
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for i := range 8 {
		want.append(t, w, Stream(1+i%2), all)
		want.append(t, w, Stdout, all[i*30:])
	}
	if err := w.AppendInput(all); err != nil {
		t.Fatal(err)
	}
	c := collect(t, dir, 0)
	if !bytes.Equal(c.data, want.data) {
		t.Fatal("binary data differs")
	}
	checkChunks(t, c, &want, 0, 0, 0)
	var ca collected
	if _, err := ReadAll(dir, 0, ca.add); err != nil {
		t.Fatal(err)
	}
	last := ca.chunks[len(ca.chunks)-1]
	if last.Stream != Input || !bytes.Equal(last.Data, all) {
		t.Fatalf("input chunk = %+v", last)
	}
}

func TestInput(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, Options{SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.AppendInput([]byte("ls\n")); err != nil {
		t.Fatal(err)
	}
	w.Append(Stdout, []byte("a b c\n"))
	if err := w.AppendInput(bytes.Repeat([]byte("y"), 10000)); err != nil {
		t.Fatal(err)
	}
	w.Append(Stderr, []byte("oops\n"))
	if w.Cursor() != 11 {
		t.Fatalf("Cursor = %d, want 11", w.Cursor())
	}

	var c collected
	end, err := ReadAll(dir, 0, c.add)
	if err != nil || end != 11 {
		t.Fatalf("ReadAll = %d, %v", end, err)
	}
	var got []string
	var inputLen int
	for _, ch := range c.chunks {
		if ch.Stream == Input && ch.Cursor == 6 {
			inputLen += len(ch.Data)
			continue
		}
		got = append(got, ch.Stream.String()+"@"+string(rune('0'+ch.Cursor))+":"+string(ch.Data))
	}
	if inputLen != 10000 {
		t.Fatalf("input at 6: %d bytes, want 10000", inputLen)
	}
	if want := []string{"input@0:ls\n", "stdout@0:a b c\n", "stderr@6:oops\n"}; !equalStrings(got, want) {
		t.Fatalf("ReadAll: %q, want %q", got, want)
	}
	// Read skips input.
	c = collect(t, dir, 0)
	if string(c.data) != "a b c\noops\n" || len(c.chunks) != 2 {
		t.Fatalf("Read = %q", c.data)
	}
	// ReadAll from 6 delivers the input at 6.
	var c2 collected
	ReadAll(dir, 6, c2.add)
	if c2.chunks[0].Stream != Input || c2.chunks[0].Cursor != 6 {
		t.Fatalf("ReadAll(6) first = %v@%d", c2.chunks[0].Stream, c2.chunks[0].Cursor)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEmptyAndMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat(missing) = %v, want ErrNotExist", err)
	}
	if _, err := Read(missing, 0, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read(missing) = %v, want ErrNotExist", err)
	}
	if _, _, err := ReadTail(missing, 10, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadTail(missing) = %v, want ErrNotExist", err)
	}

	empty := t.TempDir()
	if info, err := Stat(empty); err != nil || info != (Info{}) {
		t.Fatalf("Stat(empty dir) = %+v, %v", info, err)
	}
	w, err := Create(empty, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// No file until the first record: an empty journal is an empty dir.
	info, err := Stat(empty)
	if err != nil || info != (Info{}) {
		t.Fatalf("Stat(new journal) = %+v, %v", info, err)
	}
	if names, _ := os.ReadDir(empty); len(names) != 0 {
		t.Fatalf("a new journal made %d files", len(names))
	}
	end, err := Read(empty, 5, func(Chunk) error { t.Fatal("chunk"); return nil })
	if err != nil || end != 0 {
		t.Fatalf("Read(empty) = %d, %v", end, err)
	}
	if ws := w.Stat(); ws != (Info{}) {
		t.Fatalf("Writer.Stat(new journal) = %+v", ws)
	}
	if err := w.Sync(); err != nil {
		t.Fatalf("Sync(new journal) = %v", err)
	}
	if end, err := w.Append(Stdout, []byte("x")); err != nil || end != 1 {
		t.Fatalf("first Append = %d, %v", end, err)
	}
	info, err = Stat(empty)
	if err != nil || info.End != 1 || info.Segments != 1 || info.Bytes <= segRecordLen {
		t.Fatalf("Stat after the first record = %+v, %v", info, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(Stdout, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Create = %v, want ErrLocked", err)
	}
	w.Close()
	w, err = Create(dir, Options{})
	if err != nil {
		t.Fatalf("Create after Close: %v", err)
	}
	w.Close()
}

func TestCallbackError(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Append(Stdout, []byte("one"))
	w.Append(Stderr, []byte("two"))
	errBoom := errors.New("boom")
	n := 0
	end, err := Read(dir, 0, func(Chunk) error {
		if n++; n == 2 {
			return errBoom
		}
		return nil
	})
	if err != errBoom || end != 3 {
		t.Fatalf("Read = %d, %v; want 3, boom", end, err)
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct{ in, want Options }{
		{Options{}, Options{MaxBytes: 64 << 20, HeadBytes: 1 << 20, SegmentBytes: 1 << 20, SyncInterval: DefaultSyncInterval}},
		{Options{MaxBytes: 2 << 20, HeadBytes: 1 << 20}, Options{MaxBytes: 2 << 20, HeadBytes: 512 << 10, SegmentBytes: 512 << 10, SyncInterval: DefaultSyncInterval}},
		{Options{MaxBytes: 1, HeadBytes: -1, SegmentBytes: 1, SyncInterval: -1}, Options{MaxBytes: 16 << 10, HeadBytes: 0, SegmentBytes: 4 << 10, SyncInterval: -1}},
	} {
		if got := tc.in.normalize(); got != tc.want {
			t.Errorf("normalize(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// BenchmarkAppend appends 64 KiB chunks. The raw sub-benchmark is the
// file-system floor to compare with: the same bytes written to plain 1 MiB
// files, created and deleted like segments, without records or CRCs.
func BenchmarkAppend(b *testing.B) {
	p := randBytes(rand.New(rand.NewPCG(1, 1)), 64<<10)
	for _, bc := range []struct {
		name string
		opt  Options
	}{
		{"nosync", Options{SyncInterval: -1}},
		{"sync1s", Options{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w, err := Create(b.TempDir(), bc.opt)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if _, err := w.Append(Stdout, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("raw", func(b *testing.B) {
		dir := b.TempDir()
		name := func(seq int) string { return filepath.Join(dir, segName(seq)) }
		seq, n := 1, 0
		f, err := os.OpenFile(name(seq), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if _, err := f.Write(p); err != nil {
				b.Fatal(err)
			}
			if n++; n%16 == 0 {
				f.Close()
				seq++
				if f, err = os.OpenFile(name(seq), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600); err != nil {
					b.Fatal(err)
				}
				if seq > 64 {
					os.Remove(name(seq - 64))
				}
			}
		}
		f.Close()
	})
}

func BenchmarkReadTail(b *testing.B) {
	dir := b.TempDir()
	w, err := Create(dir, Options{SyncInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	p := randBytes(rand.New(rand.NewPCG(1, 1)), 64<<10)
	for range 2000 { // 128 MiB through a 64 MiB cap
		if _, err := w.Append(Stdout, p); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	const n = 256 << 10
	b.SetBytes(n)
	for b.Loop() {
		got := 0
		if _, _, err := ReadTail(dir, n, func(c Chunk) error { got += len(c.Data); return nil }); err != nil {
			b.Fatal(err)
		}
		if got != n {
			b.Fatalf("got %d bytes", got)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	w, err := Create(dir, Options{SyncInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	p := randBytes(rand.New(rand.NewPCG(1, 1)), 64<<10)
	for range 512 { // 32 MiB
		if _, err := w.Append(Stdout, p); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	b.SetBytes(512 * 64 << 10)
	for b.Loop() {
		if _, err := Read(dir, 0, func(Chunk) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSegmentDeletedUnderReader(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, Options{MaxBytes: 64 << 10, HeadBytes: 8 << 10, SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var want output
	for range 10 {
		want.append(t, w, Stdout, bytes.Repeat([]byte("0123456789\n"), 400))
	}
	seqs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	info, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Delete the first tail segments just before the reader opens the
	// first of them, as the cap would.
	firstTail := 0
	for i, seq := range seqs {
		if m, _ := readMeta(dir, seq); m.start >= info.TailStart {
			firstTail = i
			break
		}
	}
	victims := seqs[firstTail : firstTail+3]
	newStart, err := readMeta(dir, seqs[firstTail+3])
	if err != nil {
		t.Fatal(err)
	}
	testHookOpen = func(seq int) {
		if seq == victims[0] {
			for _, v := range victims {
				os.Remove(filepath.Join(dir, segName(v)))
			}
		}
	}
	defer func() { testHookOpen = nil }()
	c := collect(t, dir, info.TailStart+5)
	if c.chunks[0].Cursor != newStart.start || !bytes.Equal(c.data, want.data[newStart.start:]) {
		t.Fatalf("read after deletion starts at %d, want %d", c.chunks[0].Cursor, newStart.start)
	}
	// Deleting the last listed segment: the reader finds what follows.
	last := seqs[len(seqs)-1]
	testHookOpen = func(seq int) {
		if seq == last {
			testHookOpen = nil
			want.append(t, w, Stdout, bytes.Repeat([]byte("z"), 5000)) // rolls
			os.Remove(filepath.Join(dir, segName(last)))
		}
	}
	m, err := readMeta(dir, last)
	if err != nil {
		t.Fatal(err)
	}
	c = collect(t, dir, m.start)
	if got := c.chunks[0].Cursor; got <= m.start || !bytes.Equal(c.data, want.data[got:]) {
		t.Fatalf("read after deleting the last segment starts at %d", got)
	}
}

func TestResumeInterruptedDrop(t *testing.T) {
	// A writer that died after starting a segment but before deleting the
	// segments it dropped: readers still see them, Create deletes them.
	dir := t.TempDir()
	opt := Options{MaxBytes: 64 << 10, HeadBytes: 8 << 10, SegmentBytes: 4 << 10}
	w, err := Create(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	var want output
	for range 30 {
		want.append(t, w, Stdout, bytes.Repeat([]byte("0123456789\n"), 400))
	}
	info, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	seqs, _ := listSegments(dir)
	var oldest []byte
	var oldestSeq int
	for _, seq := range seqs {
		if m, _ := readMeta(dir, seq); m.start >= info.TailStart {
			oldestSeq = seq
			oldest, err = os.ReadFile(filepath.Join(dir, segName(seq)))
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	for {
		want.append(t, w, Stdout, []byte("more\n"))
		if _, err := os.Stat(filepath.Join(dir, segName(oldestSeq))); err != nil {
			break
		}
	}
	w.Close()
	info, err = Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, segName(oldestSeq)), oldest, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err = Create(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := os.Stat(filepath.Join(dir, segName(oldestSeq))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("dropped segment still there: %v", err)
	}
	if wi := w.Stat(); wi != info {
		t.Fatalf("Writer.Stat = %+v, want %+v", wi, info)
	}
	c := collect(t, dir, 0)
	checkChunks(t, c, &want, 0, info.HeadEnd, info.TailStart)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
}

// FuzzSegment feeds arbitrary bytes to the readers and to recovery as the
// last segment of a journal. Nothing may panic, and after recovery the
// journal must read back cleanly.
func FuzzSegment(f *testing.F) {
	valid := appendRecord(nil, recSegment, 0, 1, encodeSegMeta(segMeta{headLimit: 10}))
	valid = appendRecord(valid, recStdout, 0, 2, []byte("hello\n"))
	valid = appendRecord(valid, recInput, 6, 3, []byte("y"))
	valid = appendRecord(valid, recStderr, 6, 4, []byte("world"))
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(append(bytes.Clone(valid), 0, 0, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, seg []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segName(1)), seg, 0o600); err != nil {
			t.Fatal(err)
		}
		info, err := Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		var c collected
		end, err := ReadAll(dir, 0, c.add)
		if err != nil || end != info.End {
			t.Fatalf("ReadAll = %d, %v; Stat End %d", end, err, info.End)
		}
		if _, _, err := ReadTail(dir, 3, func(Chunk) error { return nil }); err != nil {
			t.Fatal(err)
		}
		w, err := Create(dir, Options{SyncInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if w.Cursor() != info.End {
			t.Fatalf("resumed at %d, want %d", w.Cursor(), info.End)
		}
		if _, err := w.Append(Stdout, []byte("more")); err != nil {
			t.Fatal(err)
		}
		var c2 collected
		if _, err := Read(dir, 0, c2.add); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c2.data, append(c.data, "more"...)) {
			t.Fatalf("after recovery: %q, want %q", c2.data, append(c.data, "more"...))
		}
	})
}

// TestTrim: Trim applies a lower cap at once, keeping the head and the
// newest tail; later appends keep to it; it never raises the cap.
func TestTrim(t *testing.T) {
	const (
		head = 256 << 10
		seg  = 64 << 10
	)
	dir := t.TempDir()
	w, err := Create(dir, Options{MaxBytes: 8 << 20, HeadBytes: head, SegmentBytes: seg})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := rand.New(rand.NewPCG(5, 6))
	var want output
	for len(want.data) < 6<<20 {
		want.append(t, w, Stdout, randBytes(r, 1+r.IntN(20<<10)))
	}
	before, after, err := w.Trim(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if before < 6<<20 || after > 1<<20 {
		t.Fatalf("Trim: %d -> %d bytes, want <= 1 MiB after", before, after)
	}
	info, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Bytes != after || info.HeadEnd != head || info.End != int64(len(want.data)) || info.DroppedBytes != info.TailStart-info.HeadEnd {
		t.Fatalf("after Trim: %+v (Trim said %d bytes)", info, after)
	}
	c := collect(t, dir, 0)
	if !bytes.Equal(c.data, append(bytes.Clone(want.data[:head]), want.data[info.TailStart:]...)) {
		t.Fatal("after Trim the journal is not the head plus the newest tail")
	}
	for len(want.data) < 9<<20 {
		want.append(t, w, Stdout, randBytes(r, 1+r.IntN(20<<10)))
	}
	if info, _ := Stat(dir); info.Bytes > 1<<20+1<<20/50 {
		t.Fatalf("appends after Trim: %d bytes on disk, want the 1 MiB cap", info.Bytes)
	}
	if _, after2, err := w.Trim(4 << 20); err != nil || after2 > 1<<20+1<<20/50 {
		t.Fatalf("a higher Trim: %d bytes, %v", after2, err)
	}
	if _, after3, err := w.Trim(1); err != nil || after3 < head {
		t.Fatalf("Trim(1) took the head: %d bytes, %v", after3, err)
	}
}
