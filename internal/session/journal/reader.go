package journal

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// maxRetries bounds how often a reader starts over when the cap deletes
// segments under it.
const maxRetries = 100

// testHookOpen, if set, is called before a reader opens a segment to read it.
var testHookOpen func(seq int)

// errStop ends a scan early without an error.
var errStop = errors.New("stop")

// Read calls fn, in order, with every output chunk holding bytes at
// positions >= since, and returns the end cursor it covered: the cursor
// just after the last output byte read (the journal end unless fn failed).
// A since beyond the end delivers nothing and returns the end; a negative
// since means 0.
//
// The first chunk is trimmed to start exactly at since. If since falls in
// the dropped range, or in segments the cap deletes while Read runs, the
// first chunk starts at the next kept byte; a caller sees the skip as
// Chunk.Cursor > since. Later chunks are contiguous except across the
// dropped range. Chunk.Data is only valid during fn.
//
// Read takes no lock and is safe while a writer, in this or another
// process, appends: it reads up to the last complete record it finds.
// Repeated calls with the same since return the same bytes as long as they
// are kept. It finds the starting segment by binary search over the
// segments' first records, so it does not read earlier segments. If fn
// returns an error, Read stops and returns it unchanged, with end just
// after the last chunk delivered. A missing dir is an error wrapping
// fs.ErrNotExist; an empty journal returns 0.
func Read(dir string, since int64, fn func(Chunk) error) (end int64, err error) {
	_, end, err = read(dir, since, -1, false, fn)
	return end, err
}

// ReadRange is [Read] that stops at cursor until: it delivers the bytes at
// positions in [since, until) and returns an end of at most until. until <
// 0 means no bound.
func ReadRange(dir string, since, until int64, fn func(Chunk) error) (end int64, err error) {
	_, end, err = read(dir, since, until, false, fn)
	return end, err
}

// ReadAll is [Read] that also delivers input records, as chunks with Stream
// Input, in the order they were written relative to the output. It
// delivers the input records with Cursor >= since; an input written at the
// end of a read's output therefore has Cursor == end and is delivered again
// by a following read from end.
func ReadAll(dir string, since int64, fn func(Chunk) error) (end int64, err error) {
	_, end, err = read(dir, since, -1, true, fn)
	return end, err
}

// ReadTail calls fn with the last n bytes of kept output, as of its start,
// and returns the cursors of the first byte delivered and of the end. If
// fewer than n bytes follow the dropped range, the rest come from the end
// of the head, so the chunks then jump from HeadEnd to TailStart. It reads
// only the segments that hold those bytes plus the last one. n <= 0
// delivers nothing and returns start == end == the journal end. Otherwise
// it behaves like [Read].
func ReadTail(dir string, n int64, fn func(Chunk) error) (start, end int64, err error) {
	var seqs []int
	var info Info
	var last *lastSeg
	for attempt := 0; ; attempt++ {
		if seqs, err = listSegments(dir); err == nil {
			info, last, err = statSegments(dir, seqs, false)
		}
		if err == nil || !isNotExist(err) || attempt == maxRetries || len(seqs) == 0 {
			break
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read journal tail: %w", err)
	}
	if n <= 0 || last == nil {
		return info.End, info.End, nil
	}
	since := info.End - n
	if since < info.TailStart && info.DroppedBytes > 0 {
		since = info.HeadEnd - (n - (info.End - info.TailStart))
	}
	first, end, err := readSegments(dir, seqs, last, max(since, 0), info.End, false, fn)
	if first < 0 {
		first = end
	}
	var fe fnError
	if errors.As(err, &fe) {
		return first, end, fe.err
	}
	if err != nil {
		err = fmt.Errorf("read journal tail: %w", err)
	}
	return first, end, err
}

// Stat describes the journal in dir. It reads the first record and scans
// the last segment (up to 1 segment of data) and stats every segment. A
// missing dir is an error wrapping fs.ErrNotExist; a directory without
// segments gives the zero Info.
func Stat(dir string) (Info, error) { return stat(dir, true) }

func stat(dir string, sizes bool) (Info, error) {
	for attempt := 0; ; attempt++ {
		seqs, err := listSegments(dir)
		var info Info
		if err == nil {
			info, _, err = statSegments(dir, seqs, sizes)
		}
		if err == nil || !isNotExist(err) || attempt == maxRetries || len(seqs) == 0 {
			if err != nil {
				return Info{}, fmt.Errorf("stat journal: %w", err)
			}
			return info, nil
		}
	}
}

// ReadEnd returns the payload of the last end record ([Writer.AppendEnd])
// in the journal's last readable segment and the cursor it was written at;
// ok is false if there is none (the session has not ended, or the record
// was lost). The payload is a copy.
func ReadEnd(dir string) (p []byte, cursor int64, ok bool, err error) {
	seqs, err := listSegments(dir)
	if err != nil {
		return nil, 0, false, fmt.Errorf("read journal end: %w", err)
	}
	for i := len(seqs) - 1; i >= 0; i-- {
		f, err := os.Open(filepath.Join(dir, segName(seqs[i])))
		if isNotExist(err) {
			continue
		}
		if err != nil {
			return nil, 0, false, fmt.Errorf("read journal end: %w", err)
		}
		sc := scanFile(f)
		sc.resync = true
		for sc.next() {
			if sc.rec.typ == recEnd {
				p, cursor, ok = append([]byte(nil), sc.rec.payload...), sc.rec.cursor, true
			}
		}
		n, serr := sc.n, sc.err
		f.Close()
		sc.done()
		if serr != nil {
			return nil, 0, false, fmt.Errorf("read journal end: %w", serr)
		}
		if n > 0 {
			return p, cursor, ok, nil
		}
	}
	return nil, 0, false, nil
}

// lastSeg is what a scan of the last segment learned, so that a read
// starting in it need not scan it again.
type lastSeg struct {
	seq   int
	start int64
	marks []mark // record boundaries about every markEvery bytes, ascending
}

// mark is a record boundary: the cursor before the record and its offset.
type mark struct{ cursor, off int64 }

const markEvery = 64 << 10

// statSegments describes the journal made of seqs. last is nil if the
// journal is empty. An error wrapping fs.ErrNotExist means a segment was
// deleted under it.
func statSegments(dir string, seqs []int, sizes bool) (info Info, last *lastSeg, err error) {
	for i := len(seqs) - 1; i >= 0 && last == nil; i-- {
		f, err := os.Open(filepath.Join(dir, segName(seqs[i])))
		if err != nil {
			return Info{}, nil, err
		}
		sc := scanFile(f)
		sc.resync = true
		ls := &lastSeg{seq: seqs[i]}
		var markOff int64
		for {
			off, pos := sc.off, sc.pos
			if !sc.next() {
				break
			}
			if sc.n > 1 && off-markOff >= markEvery {
				ls.marks = append(ls.marks, mark{cursor: pos, off: off})
				markOff = off
			}
		}
		f.Close()
		sc.done()
		switch {
		case sc.err != nil:
			return Info{}, nil, sc.err
		case sc.n == 0:
			// Just created by the writer, torn by a crash, or damaged
			// beyond reading: the journal ends in the segment before.
			continue
		}
		ls.start = sc.meta.start
		info, last = sc.meta.info(sc.pos), ls
	}
	if sizes {
		for _, seq := range seqs {
			fi, err := os.Stat(filepath.Join(dir, segName(seq)))
			if isNotExist(err) {
				continue
			}
			if err != nil {
				return Info{}, nil, err
			}
			info.Segments++
			info.Bytes += fi.Size()
		}
	}
	return info, last, nil
}

// read delivers the chunks at positions in [since, until) (until < 0: no
// bound), and input records too if input is set. It returns the cursor of
// the first byte delivered (-1 if none) and the end covered.
func read(dir string, since, until int64, input bool, fn func(Chunk) error) (first, end int64, err error) {
	first, end, err = readSegments(dir, nil, nil, max(since, 0), until, input, fn)
	var fe fnError
	if errors.As(err, &fe) {
		return first, end, fe.err
	}
	if err != nil {
		err = fmt.Errorf("read journal: %w", err)
	}
	return first, end, err
}

// fnError carries an error returned by the caller's callback, which read
// returns unchanged.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// readSegments does the work of read. If seqs is nil it lists dir; last,
// if not nil, is what statSegments found about seqs.
func readSegments(dir string, seqs []int, last *lastSeg, since, until int64, input bool, fn func(Chunk) error) (first, end int64, err error) {
	first = -1
	var idx int
	for attempt := 0; ; attempt++ {
		if seqs == nil {
			if seqs, err = listSegments(dir); err != nil {
				return first, 0, err
			}
		}
		if idx, err = locate(dir, seqs, last, since); err == nil {
			break
		}
		if !isNotExist(err) || attempt == maxRetries {
			return first, 0, err
		}
		if attempt >= 8 {
			// A writer rotating faster than we list: let it run.
			time.Sleep(time.Millisecond)
		}
		seqs, last = nil, nil
	}

	for i := idx; i < len(seqs); i++ {
		seq := seqs[i]
		if testHookOpen != nil {
			testHookOpen(seq)
		}
		f, err := os.Open(filepath.Join(dir, segName(seq)))
		if isNotExist(err) {
			// Deleted by the cap: go on with whatever follows it now.
			if seqs, err = listSegments(dir); err != nil {
				return first, end, err
			}
			i = sort.SearchInts(seqs, seq+1) - 1
			continue
		}
		if err != nil {
			return first, end, err
		}
		sc := scanFile(f)
		sc.resync = true
		if last != nil && seq == last.seq {
			// Start at the last record boundary before since.
			j := sort.Search(len(last.marks), func(j int) bool { return last.marks[j].cursor >= since })
			if j > 0 {
				m := last.marks[j-1]
				if _, err := f.Seek(m.off, io.SeekStart); err != nil {
					f.Close()
					sc.done()
					return first, end, err
				}
				sc.br.Reset(f)
				sc.off, sc.pos, sc.n = m.off, m.cursor, 1
				sc.meta.start = last.start
			}
		}
		err = deliver(sc, since, until, input, fn, &first, &end)
		f.Close()
		sc.done()
		if err == errStop {
			break
		}
		if err != nil {
			return first, end, err
		}
		// A segment damaged past its last readable record is followed by
		// the next one: the chunks jump over what was lost.
	}
	if until >= 0 && end > until {
		end = until
	}
	return first, end, nil
}

// deliver scans one segment, calling fn for the chunks in [since, until).
func deliver(sc *scanner, since, until int64, input bool, fn func(Chunk) error, first, end *int64) error {
	for sc.next() {
		r := &sc.rec
		switch r.typ {
		case recStdout, recStderr:
			c, e := r.cursor, r.end()
			if e <= since {
				break
			}
			if until >= 0 && max(c, since) >= until {
				return errStop
			}
			data := r.payload
			if c < since {
				data = data[since-c:]
				c = since
			}
			if until >= 0 && e > until {
				data = data[:until-c]
			}
			if err := fn(Chunk{Cursor: c, Stream: Stream(r.typ), Data: data, TimeNs: r.ts}); err != nil {
				return fnError{err}
			}
			if *first < 0 {
				*first = c
			}
		case recInput:
			if !input || r.cursor < since {
				break
			}
			if err := fn(Chunk{Cursor: r.cursor, Stream: Input, Data: r.payload, TimeNs: r.ts}); err != nil {
				return fnError{err}
			}
		}
		*end = max(*end, r.end())
	}
	return sc.err
}

// locate returns the index in seqs of the segment to start reading at for
// since: the last one whose start is <= since, or 0. last, if not nil,
// describes the last valid segment.
func locate(dir string, seqs []int, last *lastSeg, since int64) (int, error) {
	n := len(seqs)
	if last != nil {
		i := sort.SearchInts(seqs, last.seq)
		if i < n && seqs[i] == last.seq {
			if since >= last.start {
				return i, nil
			}
			n = i
		}
	}
	var err error
	i := sort.Search(n, func(i int) bool {
		if err != nil {
			return true
		}
		m, e := readMeta(dir, seqs[i])
		switch {
		case errors.Is(e, errNoMeta):
			// The writer is creating it (the last one), or it is
			// damaged beyond reading: nothing to find in it. (Starting
			// the read earlier than needed only costs time.)
			m.start = math.MaxInt64
		case e != nil:
			err = e
			return true
		}
		return m.start > since
	})
	return max(i-1, 0), err
}
