package journal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
type scanner struct {
	br   *bufio.Reader
	rec  record  // the current record; its payload is valid until next
	meta segMeta // the segment record, once n > 0
	n    int     // valid records read
	off  int64   // file offset after the last valid record
	pos  int64   // cursor after the last valid record
	bad  bool    // stopped at an invalid or incomplete record (at off)
	err  error   // stopped at a read error
}

// next advances to the next valid record. It returns false at the end of
// the file, at an invalid or incomplete record (bad), or on a read error.
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
		s.bad = true
		return false
	}
	if b, err = s.br.Peek(n); len(b) < n {
		if err != nil && err != io.EOF {
			s.err = err
		} else {
			s.bad = true
		}
		return false
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
		s.bad = true
		return false
	}
	// Discard cannot fail here: n bytes are buffered. It keeps b intact
	// until the next Peek.
	s.br.Discard(n)
	s.rec = r
	s.n++
	s.off += int64(n)
	s.pos = r.end()
	return true
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
func readMeta(dir string, seq int) (segMeta, error) {
	f, err := os.Open(filepath.Join(dir, segName(seq)))
	if err != nil {
		return segMeta{}, err
	}
	defer f.Close()
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

func corrupt(seq int, off int64) error {
	return fmt.Errorf("segment %s offset %d: %w", segName(seq), off, ErrCorrupt)
}

// isNotExist reports whether err means a file is gone.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
