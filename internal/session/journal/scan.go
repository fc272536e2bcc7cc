package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// readBufSize is the buffer of a segment scan; it must hold a whole record.
const readBufSize = 256 << 10

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}

// scanner reads the records of one segment in order, checking each record's
// CRC and that its cursor continues the one before. The first record must be
// a segment record.
//
// With resync set, an invalid record is not the end: the scanner looks
// byte by byte for the next valid record (see resyncAt) and goes on from
// there, so one damaged record costs only the bytes it held. The cursor of
// the record found tells how many output bytes were lost.
type scanner struct {
	br     *bufio.Reader
	rec    record  // the current record; its payload is valid until next
	meta   segMeta // the segment record, once n > 0
	n      int     // valid records read
	off    int64   // file offset after the last valid record
	pos    int64   // cursor after the last valid record
	bad    bool    // stopped at an invalid or incomplete record (at off)
	err    error   // stopped at a read error
	resync bool    // skip damaged records instead of stopping at them
	// skipped counts the file bytes passed over by resynchronisation.
	skipped int64
	lastTS  int64 // time of the last valid record
}

// next advances to the next valid record. It returns false at the end of
// the file, at an invalid or incomplete record (bad) that resynchronisation
// (if enabled) cannot get past, or on a read error.
func (s *scanner) next() bool {
	b, err := s.br.Peek(headerLen)
	if len(b) < headerLen {
		switch {
		case len(b) == 0 && err == io.EOF:
		case err != nil && err != io.EOF:
			s.err = err
		default:
			s.bad = true
		}
		return false
	}
	n := recordLen(b)
	if n < 0 {
		return s.recover()
	}
	if b, err = s.br.Peek(n); len(b) < n {
		if err != nil && err != io.EOF {
			s.err = err
			return false
		}
		return s.recover()
	}
	r, ok := decodeRecord(b)
	if ok {
		if s.n == 0 {
			s.meta, ok = decodeSegMeta(&r)
		} else {
			ok = r.typ != recSegment && r.cursor == s.pos
		}
	}
	if !ok {
		return s.recover()
	}
	// Discard cannot fail here: n bytes are buffered. It keeps b intact
	// until the next Peek.
	s.br.Discard(n)
	s.accept(r, n)
	return true
}

func (s *scanner) accept(r record, n int) {
	// Not a segment record's time: one Append takes its time before it
	// starts a segment, so its records after the segment record are
	// older than it.
	if r.typ != recSegment {
		s.lastTS = r.ts
	}
	s.rec = r
	s.n++
	s.off += int64(n)
	s.pos = r.end()
}

// recover handles an invalid record at s.off: without resync it is the
// end (bad); with it the scanner moves to the next valid record, or, if
// there is none, stops as bad with off and pos still after the last valid
// record (the bytes read past it are consumed: a scanner does not go back).
func (s *scanner) recover() bool {
	if !s.resync {
		s.bad = true
		return false
	}
	if s.skipOne() {
		return true
	}
	skipped := int64(0)
	for {
		if _, err := s.br.Discard(1); err != nil {
			s.bad = true
			return false
		}
		skipped++
		b, err := s.br.Peek(headerLen)
		if len(b) < headerLen {
			if err != nil && err != io.EOF {
				s.err = err
			} else {
				s.bad = true
			}
			return false
		}
		if !s.candidate(b, skipped) {
			continue
		}
		n := recordLen(b)
		if b, err = s.br.Peek(n); len(b) < n {
			if err != nil && err != io.EOF {
				s.err = err
				return false
			}
			continue
		}
		r, ok := decodeRecord(b)
		if !ok || r.ts < s.lastTS {
			continue
		}
		s.br.Discard(n)
		if s.n == 0 {
			// The segment record itself is lost: the segment starts
			// where its first readable record does, and what it said
			// about the head and the dropped range is unknown.
			s.meta = segMeta{start: r.cursor, headLimit: math.MaxInt64}
			s.n++
		}
		s.skipped += skipped
		s.off += skipped
		s.accept(r, n)
		return true
	}
}

// skipOne handles the common damage, a record whose length field is
// intact (a flipped byte in its payload, CRC, cursor or time): if the
// bytes just after it hold a valid record that continues the journal as if
// the damaged record had held len bytes of output or none, it skips exactly
// the damaged record, never looking inside its payload.
func (s *scanner) skipOne() bool {
	if s.n == 0 {
		return false
	}
	b, _ := s.br.Peek(headerLen)
	if len(b) < headerLen {
		return false
	}
	n := recordLen(b)
	if n < 0 {
		return false
	}
	if b, _ = s.br.Peek(n + headerLen); len(b) < n+headerLen {
		return false
	}
	m := recordLen(b[n:])
	if m < 0 {
		return false
	}
	if b, _ = s.br.Peek(n + m); len(b) < n+m {
		return false
	}
	r, ok := decodeRecord(b[n:])
	if !ok || r.typ == recSegment || r.ts < s.lastTS || r.cursor != s.pos && r.cursor != s.pos+int64(n-overhead) {
		return false
	}
	s.br.Discard(n + m)
	s.skipped += int64(n)
	s.off += int64(n)
	s.accept(r, m)
	return true
}

// candidate reports whether the header b, found skipped bytes after the
// last valid record, may start the next valid record: a known type other
// than a segment record, zero flags, a length in range, and a cursor that
// the skipped bytes can account for (each lost output byte took at least
// one byte of the file, and at least one whole record was skipped). Only
// then is its CRC checked, and its time must not be before the last valid
// record's: a false record (say, a copy of a journal inside a command's
// output) would have to match the cursor, the time and the CRC-32C.
func (s *scanner) candidate(b []byte, skipped int64) bool {
	switch b[0] {
	case recStdout, recStderr, recInput, recEnd:
	default:
		return false
	}
	if b[1] != 0 || recordLen(b) < 0 {
		return false
	}
	c := int64(binary.LittleEndian.Uint64(b[6:]))
	if s.n == 0 {
		return c >= 0
	}
	return c >= s.pos && c <= s.pos+skipped-overhead
}

// scanFile returns a scanner over f using a pooled buffer; release it with
// done.
func scanFile(f *os.File) *scanner {
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(f)
	return &scanner{br: br}
}

func (s *scanner) done() {
	s.br.Reset(nil)
	readerPool.Put(s.br)
	s.br = nil
}

// listSegments returns the sequence numbers of the segments in dir, in
// order.
func listSegments(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	seqs := make([]int, 0, len(ents))
	for _, e := range ents {
		if seq, ok := parseSegName(e.Name()); ok && e.Type().IsRegular() {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// errNoMeta reports a segment without a valid first record.
var errNoMeta = errors.New("no segment record")

// readMeta reads the segment record at the start of segment seq. It
// returns an error wrapping fs.ErrNotExist if the segment is gone and
// errNoMeta if its first record is missing or invalid.
//
// A segment whose segment record is damaged but which holds a later valid
// record starts at that record (see scanner.recover).
func readMeta(dir string, seq int) (segMeta, error) {
	f, err := os.Open(filepath.Join(dir, segName(seq)))
	if err != nil {
		return segMeta{}, err
	}
	defer f.Close()
	m, err := readMetaFile(f)
	if !errors.Is(err, errNoMeta) {
		return m, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return segMeta{}, err
	}
	sc := scanFile(f)
	sc.resync = true
	defer sc.done()
	if sc.next() {
		return sc.meta, nil
	}
	if sc.err != nil {
		return segMeta{}, sc.err
	}
	return segMeta{}, errNoMeta
}

func readMetaFile(f *os.File) (segMeta, error) {
	var buf [segRecordLen]byte
	b := buf[:]
	got, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return segMeta{}, err
	}
	if got < headerLen {
		return segMeta{}, errNoMeta
	}
	n := recordLen(b)
	if n < 0 {
		return segMeta{}, errNoMeta
	}
	if n > len(b) {
		b = make([]byte, n)
		if got, err = f.ReadAt(b, 0); err != nil && err != io.EOF {
			return segMeta{}, err
		}
	}
	if got < n {
		return segMeta{}, errNoMeta
	}
	b = b[:n]
	r, ok := decodeRecord(b)
	if !ok {
		return segMeta{}, errNoMeta
	}
	m, ok := decodeSegMeta(&r)
	if !ok {
		return segMeta{}, errNoMeta
	}
	return m, nil
}

// isNotExist reports whether err means a file is gone.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
