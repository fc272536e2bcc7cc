package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/conchsh/conch/internal/base/fsutil"
)

// # Line index
//
// Next to each segment NNNNNN.seg the writer keeps NNNNNN.idx, a sparse
// index of the output's lines: fixed-size entries, each a checkpoint at a
// record boundary of the segment, appended about every indexEvery bytes
// of segment and once when the segment is closed (the seal):
//
//	offset size field
//	0      1    kind     u8: 1 checkpoint, 2 seal
//	1      1    state    u8: escape state of the output at cursor (see lexState)
//	2      1    flags    u8: bit 0: the byte before cursor was 0xC2
//	3      1    zero
//	4      8    off      u64 LE, file offset of the record boundary
//	12     8    cursor   u64 LE, output cursor there
//	20     8    lines    u64 LE, LF bytes in the output before cursor (dropped ones included)
//	28     8    run      u64 LE, bytes since the last LF before cursor
//	36     8    maxRun   u64 LE, longest LF-free run of the output so far
//	44     8    hazards  u64 LE, LFs so far written inside an escape sequence
//	52     4    crc      u32 LE, CRC-32C of bytes [0, 52)
//
// The index is a cache: a reader checks each entry's CRC, takes the entries
// up to the first bad one, checks that the record at an entry's offset
// starts at its cursor before it trusts it, and rebuilds (in memory, by
// scanning the segment from the end state of the segment before) what a
// missing, cut or damaged index file lacks. A writer resuming a journal
// rewrites the index files it had to rebuild. Index entries never describe
// output they have not seen: what a reader cannot establish (a segment
// whose predecessor the cap deleted, a damaged segment) makes the index
// unusable, and callers fall back to reading the journal.

const (
	ixLen       = 56
	ixCheck     = 1
	ixSeal      = 2
	ixFlagPrevC = 1
)

// indexEvery is the distance between checkpoints, in bytes of segment
// (a variable for tests).
var indexEvery int64 = 64 << 10

// lexState is a conservative model of the escape parser of a renderer fed
// the output: whenever such a parser may be inside an escape, control or
// string sequence, the state is not lexGround. (It may claim a sequence
// where the parser has left it; never the reverse.) An LF that arrives
// outside lexGround is a hazard: a renderer may not end a line there, or
// may end it in a state a fresh renderer does not start in.
const (
	lexGround = iota
	lexEsc    // after ESC, or ESC and intermediates
	lexCSI    // inside a control sequence
	lexOSC    // inside an OSC string (BEL or ST ends it)
	lexStr    // inside a DCS, SOS, PM or APC string (ST ends it)
	lexStates
)

// lineState is what the index records at a cursor.
type lineState struct {
	off     int64 // file offset (in the entry's segment)
	cursor  int64
	lines   int64
	run     int64
	maxRun  int64
	hazards int64
	state   uint8
	prevC2  bool
}

// feed advances the state over output bytes p. Lines without ESC, CAN,
// SUB or 0xC2 (a C1 control's first byte) written in the ground state
// are passed over by word-at-a-time searches.
func (s *lineState) feed(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		line := p
		if i >= 0 {
			line = p[:i]
		}
		if s.state == lexGround && !s.prevC2 && plainText(line) {
			s.run += int64(len(line))
			s.maxRun = max(s.maxRun, s.run)
			if i < 0 {
				return
			}
			s.lines++
			s.run = 0
			p = p[i+1:]
			continue
		}
		if i >= 0 {
			line = p[:i+1]
		}
		s.feedSlow(line)
		p = p[len(line):]
	}
}

// plainText reports whether b holds none of the bytes that may start or
// end an escape sequence.
func plainText(b []byte) bool {
	return bytes.IndexByte(b, 0x1B) < 0 && bytes.IndexByte(b, 0xC2) < 0 &&
		bytes.IndexByte(b, 0x18) < 0 && bytes.IndexByte(b, 0x1A) < 0
}

// feedSlow advances the state over p byte by byte.
func (s *lineState) feedSlow(p []byte) {
	st, prev := s.state, s.prevC2
	run := s.run
	for _, b := range p {
		if prev && b >= 0x80 && b <= 0x9F {
			// A C1 control as UTF-8 (U+0080–U+009F): it ends any
			// sequence and acts as ESC + (b − 0x40).
			switch b {
			case 0x9B:
				st = lexCSI
			case 0x9D:
				st = lexOSC
			case 0x90, 0x98, 0x9E, 0x9F:
				st = lexStr
			default:
				st = lexGround
			}
			prev = false
			run++
			continue
		}
		prev = b == 0xC2
		switch {
		case b == '\n':
			if st != lexGround {
				s.hazards++
			}
			s.lines++
			s.maxRun = max(s.maxRun, run)
			run = 0
			continue
		case b == 0x1B:
			st = lexEsc
		case b == 0x18 || b == 0x1A: // CAN, SUB abort a sequence
			st = lexGround
		case st == lexEsc:
			switch {
			case b == '[':
				st = lexCSI
			case b == ']':
				st = lexOSC
			case b == 'P' || b == 'X' || b == '^' || b == '_':
				st = lexStr
			case b >= 0x30 && b <= 0x7E:
				st = lexGround
			}
		case st == lexCSI:
			if b >= 0x40 && b <= 0x7E {
				st = lexGround
			}
		case st == lexOSC:
			if b == 0x07 {
				st = lexGround
			}
		}
		run++
	}
	s.maxRun = max(s.maxRun, run)
	s.state, s.prevC2, s.run = st, prev, run
}

func encodeEntry(b []byte, kind uint8, s lineState) []byte {
	start := len(b)
	var flags uint8
	if s.prevC2 {
		flags |= ixFlagPrevC
	}
	b = append(b, kind, s.state, flags, 0)
	for _, v := range [...]int64{s.off, s.cursor, s.lines, s.run, s.maxRun, s.hazards} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli()))
}

func decodeEntry(b []byte) (kind uint8, s lineState, ok bool) {
	if len(b) < ixLen || crc32.Checksum(b[:ixLen-crcLen], castagnoli()) != binary.LittleEndian.Uint32(b[ixLen-crcLen:]) {
		return 0, s, false
	}
	kind = b[0]
	if kind != ixCheck && kind != ixSeal || b[1] >= lexStates || b[2]&^ixFlagPrevC != 0 || b[3] != 0 {
		return 0, s, false
	}
	var v [6]int64
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[4+8*i:]))
		if v[i] < 0 {
			return 0, s, false
		}
	}
	s = lineState{off: v[0], cursor: v[1], lines: v[2], run: v[3], maxRun: v[4], hazards: v[5], state: b[1], prevC2: b[2]&ixFlagPrevC != 0}
	return kind, s, true
}

// idxName returns the index file name of segment seq.
func idxName(seq int) string { return fmt.Sprintf("%06d.idx", seq) }

// segIndex is the index of one segment as a reader established it.
type segIndex struct {
	seq    int
	start  int64       // cursor of the segment record (from the first entry)
	marks  []lineState // checkpoints, ascending; marks[0] is at offset 0
	seal   *lineState  // the state at the segment's end, if it was closed
	built  bool        // rebuilt by scanning (the file lacked something)
	broken bool        // cannot be established
}

// readIndexFile returns the valid entries of segment seq's index file, up
// to the first invalid one.
func readIndexFile(dir string, seq int) (marks []lineState, seal *lineState) {
	b, err := os.ReadFile(filepath.Join(dir, idxName(seq)))
	if err != nil {
		return nil, nil
	}
	for ; len(b) >= ixLen; b = b[ixLen:] {
		kind, s, ok := decodeEntry(b)
		if !ok {
			break
		}
		if n := len(marks); n > 0 && (s.off <= marks[n-1].off || s.cursor < marks[n-1].cursor || s.lines < marks[n-1].lines) {
			break
		}
		if n := len(marks); n == 0 && s.off != 0 {
			break
		}
		if kind == ixSeal {
			seal = &s
			break
		}
		marks = append(marks, s)
	}
	return marks, seal
}

// scanIndex scans segment seq from checkpoint from (whose record boundary
// it checks) and returns the state at the end of the segment (or at until,
// a cursor, if until >= 0 and the segment reaches it), calling mark at
// every record boundary about indexEvery bytes apart if mark is not nil.
// It fails with errIndex if the segment is damaged or does not match from.
func scanIndex(dir string, seq int, from lineState, until int64, mark func(lineState)) (lineState, error) {
	f, err := os.Open(filepath.Join(dir, segName(seq)))
	if err != nil {
		return from, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return from, err
	} else if from.off > fi.Size() {
		return from, errIndex
	}
	if _, err := f.Seek(from.off, io.SeekStart); err != nil {
		return from, err
	}
	sc := scanFile(f)
	defer sc.done()
	sc.resync = true
	if from.off > 0 {
		sc.off, sc.pos, sc.n = from.off, from.cursor, 1
	}
	s := from
	last := from.off
	for {
		off := sc.off
		if !sc.next() {
			break
		}
		if sc.skipped > 0 {
			return s, errIndex
		}
		r := &sc.rec
		if sc.n == 1 && from.off == 0 {
			if r.typ != recSegment || r.cursor != from.cursor {
				return s, errIndex
			}
		}
		if mark != nil && off-last >= indexEvery {
			s.off = off
			mark(s)
			last = off
		}
		if r.typ != recStdout && r.typ != recStderr {
			continue
		}
		p := r.payload
		if until >= 0 && r.cursor+int64(len(p)) > until {
			p = p[:max(until-r.cursor, 0)]
		}
		s.feed(p)
		s.cursor = r.cursor + int64(len(p))
		if until >= 0 && s.cursor >= until {
			break
		}
	}
	if sc.err != nil {
		return s, sc.err
	}
	if sc.n == 0 || sc.skipped > 0 {
		return s, errIndex
	}
	s.off = sc.off
	return s, nil
}

// errIndex says the line index cannot be established.
var errIndex = errors.New("journal line index unusable")

// ErrNoIndex is returned by [ReadLineIndex] when the journal's lines cannot
// be counted from its index (a damaged segment, a segment whose start the
// cap deleted along with its index): read the journal instead.
var ErrNoIndex = errors.New("no usable line index")

// LineIndex counts the LF bytes of a journal's output without reading it
// all, from the index files the writer keeps next to the segments (see
// the package documentation's line index). It is a snapshot: it describes
// the journal up to [LineIndex.Info].End as of [ReadLineIndex]. It is not
// safe for concurrent use.
//
// Line numbers count LF bytes over the whole output, dropped range
// included: the n-th LF is the n-th LF the command printed.
type LineIndex struct {
	dir  string
	info Info
	segs []*segIndex // kept segments, oldest first
	end  lineState   // at info.End
}

// ReadLineIndex reads the line index of the journal in dir. It reads each
// segment's index file and scans the last segment from its last
// checkpoint (at most about indexEvery bytes), plus any segment whose
// index must be rebuilt. It fails with an error wrapping [ErrNoIndex] if
// the index cannot be established; a missing dir is an error wrapping
// fs.ErrNotExist.
func ReadLineIndex(dir string) (*LineIndex, error) {
	for attempt := 0; ; attempt++ {
		x, err := readLineIndex(dir)
		if err == nil || !isNotExist(err) || attempt == maxRetries {
			if errors.Is(err, errIndex) {
				err = ErrNoIndex
			}
			if err != nil {
				return nil, fmt.Errorf("read journal line index: %w", err)
			}
			return x, nil
		}
		if _, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("read journal line index: %w", serr)
		}
	}
}

func readLineIndex(dir string) (*LineIndex, error) {
	seqs, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	info, last, err := statSegments(dir, seqs, false)
	if err != nil {
		return nil, err
	}
	x := &LineIndex{dir: dir, info: info}
	if last == nil {
		return x, nil
	}
	segs, err := loadIndexes(dir, seqs[:sort.SearchInts(seqs, last.seq)+1])
	if err != nil {
		return nil, err
	}
	x.segs = segs
	ls := segs[len(segs)-1]
	if ls.start != last.start {
		return nil, errIndex
	}
	end, err := scanIndex(dir, ls.seq, ls.marks[len(ls.marks)-1], -1, nil)
	if err != nil {
		return nil, err
	}
	if end.cursor != info.End {
		// The writer appended between the two scans: describe what the
		// index saw.
		if end.cursor < info.End {
			return nil, errIndex
		}
		x.info.End = end.cursor
	}
	x.end = end
	return x, nil
}

// loadIndexes establishes the index of every segment in seqs (the
// journal's segments up to its last valid one), rebuilding in memory what
// the files lack.
func loadIndexes(dir string, seqs []int) ([]*segIndex, error) {
	segs := make([]*segIndex, len(seqs))
	for i, seq := range seqs {
		marks, seal := readIndexFile(dir, seq)
		si := &segIndex{seq: seq, marks: marks, seal: seal}
		if len(marks) > 0 {
			si.start = marks[0].cursor
			// The first entry must describe this segment.
			m, err := readMeta(dir, seq)
			if err != nil && !errors.Is(err, errNoMeta) {
				return nil, err
			}
			if err != nil || m.start != si.start {
				si.marks, si.seal = nil, nil
			}
		}
		segs[i] = si
	}
	for i, si := range segs {
		if len(si.marks) > 0 {
			continue
		}
		// Rebuild from the end of the segment before.
		if i == 0 {
			if err := rebuild(dir, si, lineState{}); err != nil {
				return nil, err
			}
			continue
		}
		prev := segs[i-1]
		end := prev.seal
		if end == nil {
			e, err := scanIndex(dir, prev.seq, prev.marks[len(prev.marks)-1], -1, nil)
			if err != nil {
				return nil, err
			}
			end = &e
		}
		from := *end
		from.off = 0
		if err := rebuild(dir, si, from); err != nil {
			return nil, err
		}
		if prev.seal == nil && prev.built {
			e := *end
			prev.seal = &e
		}
	}
	return segs, nil
}

// rebuild scans segment si from its start, whose state is from (off 0;
// cursor must be the segment's start, else the segments do not join and
// the index cannot be rebuilt).
func rebuild(dir string, si *segIndex, from lineState) error {
	si.built = true
	si.start = from.cursor
	si.marks = []lineState{from}
	end, err := scanIndex(dir, si.seq, from, -1, func(s lineState) { si.marks = append(si.marks, s) })
	if err != nil {
		return err
	}
	e := end
	si.seal = &e
	return nil
}

// Info describes the journal the index covers.
func (x *LineIndex) Info() Info { return x.info }

// Plain reports whether every LF of the output (dropped range included)
// was written outside any escape sequence and no LF-free run of the
// output is longer than maxRun bytes: then a renderer of the output
// (internal/term/render) that starts just after any LF, in its initial state,
// renders what one that started at cursor 0 does from there, and ends
// lines exactly at the LFs.
func (x *LineIndex) Plain(maxRun int64) bool {
	return x.end.hazards == 0 && x.end.maxRun <= maxRun
}

// Lines returns the number of LF bytes in the output before cursor c
// (dropped LFs included), for a c in the kept output up to the end. c in
// the dropped range, or past the end, is an error.
func (x *LineIndex) Lines(c int64) (int64, error) {
	if c == x.info.End {
		return x.end.lines, nil
	}
	si, m, err := x.checkpoint(func(s lineState) bool { return s.cursor > c })
	if err != nil {
		return 0, err
	}
	s, err := scanIndex(x.dir, si.seq, m, c, nil)
	if err != nil {
		return 0, err
	}
	if s.cursor != c {
		return 0, fmt.Errorf("journal line index: cursor %d not kept: %w", c, errIndex)
	}
	return s.lines, nil
}

// LineStart returns the cursor just after the n-th LF of the output (0
// for n == 0). The n-th LF must be kept.
func (x *LineIndex) LineStart(n int64) (int64, error) {
	if n <= 0 {
		return 0, nil
	}
	if n > x.end.lines {
		return 0, fmt.Errorf("journal line index: line %d past the end: %w", n, errIndex)
	}
	si, m, err := x.checkpoint(func(s lineState) bool { return s.lines >= n })
	if err != nil {
		return 0, err
	}
	f, err := os.Open(filepath.Join(x.dir, segName(si.seq)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(m.off, io.SeekStart); err != nil {
		return 0, err
	}
	sc := scanFile(f)
	defer sc.done()
	sc.resync = true
	if m.off > 0 {
		sc.off, sc.pos, sc.n = m.off, m.cursor, 1
	}
	lines := m.lines
	for sc.next() {
		if sc.skipped > 0 {
			return 0, errIndex
		}
		r := &sc.rec
		if r.typ != recStdout && r.typ != recStderr {
			continue
		}
		p := r.payload
		for i, b := range p {
			if b == '\n' {
				lines++
				if lines == n {
					return r.cursor + int64(i) + 1, nil
				}
			}
		}
	}
	if sc.err != nil {
		return 0, sc.err
	}
	return 0, fmt.Errorf("journal line index: LF %d not found: %w", n, errIndex)
}

// checkpoint returns the last checkpoint of the kept segments before the
// first one for which after is true (after must be monotone), checking
// that its record boundary is one.
func (x *LineIndex) checkpoint(after func(lineState) bool) (*segIndex, lineState, error) {
	i := sort.Search(len(x.segs), func(i int) bool { return after(x.segs[i].marks[0]) }) - 1
	if i < 0 {
		return nil, lineState{}, fmt.Errorf("journal line index: before the first segment: %w", errIndex)
	}
	si := x.segs[i]
	j := sort.Search(len(si.marks), func(j int) bool { return after(si.marks[j]) }) - 1
	return si, si.marks[j], nil
}

// writeIndex replaces segment si's index file with its established
// entries (a rebuild), atomically.
func writeIndex(dir string, si *segIndex) error {
	var b []byte
	for _, m := range si.marks {
		b = encodeEntry(b, ixCheck, m)
	}
	if si.seal != nil {
		b = encodeEntry(b, ixSeal, *si.seal)
	}
	// A cache: no fsync (a torn one is checked and rebuilt).
	return fsutil.Write(filepath.Join(dir, idxName(si.seq)), b, fsutil.Options{Perm: 0o600, NoSync: true})
}
