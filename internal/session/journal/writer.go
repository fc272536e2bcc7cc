package journal

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/base/fsutil"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// minSplit is the smallest record Append writes to fill the end of a
// segment; with less room left it starts a new segment instead.
const minSplit = 1 << 10

// Writer appends to a journal. It is the only writer of its directory (see
// [Create]). Its methods are safe for concurrent use.
type Writer struct {
	dir  string
	opt  Options  // normalized
	dirf *os.File // the directory: holds the flock, fsynced after changes

	cursor atomic.Int64 // output end; written only with mu held

	mu       sync.Mutex // guards the fields below and the files
	f        *os.File   // the current (last) segment, O_APPEND
	segs     []segInfo  // segments on disk, oldest first; the last is f
	meta     segMeta    // head limit and drop totals as of the current segment
	buf      []byte     // encoding buffer, grown by use (a quiet journal needs none)
	dirty    bool       // f has writes not yet fsynced
	unsynced []int      // closed segments with writes not yet fsynced
	dirDirty bool       // the directory changed since the last fsync
	lastSync time.Time
	err      error // sticky: the current segment may end in a torn record
	closed   bool

	// The line index (lineindex.go): ls is the state at the cursor, ixOff
	// the offset of the current segment's last checkpoint; noIndex says
	// the state is unknown (a resumed journal whose index could not be
	// established), so no more entries are written.
	ls      lineState
	ixOff   int64
	noIndex bool
	// ixFirst is the first entry of segment 1, written with its first
	// checkpoint or its seal: a command that prints less than indexEvery
	// costs no index file (readers rebuild so short a segment's index by
	// scanning it), and a foreground call no second inode.
	ixFirst *lineState
}

// segInfo is what the writer knows of one segment.
type segInfo struct {
	seq   int
	start int64 // cursor of its segment record
	size  int64 // bytes
	lines int64 // LF bytes in its output (what dropping it drops)
}

// Create opens the journal in dir for appending, creating dir (mode 0700)
// if needed; segment files are created with mode 0600, the first one by
// the first record (a journal nothing was written to is an empty dir). If dir already holds a journal (a restarted writer), Create checks
// every segment, truncates the journal at the first invalid or torn record
// (removing any later segments), finishes deletions the cap had started,
// and resumes the cursor at the end of the last valid record; the head
// limit recorded in the journal overrides opt.HeadBytes. If not even the
// first segment starts with a valid record, the journal starts over at
// cursor 0.
//
// Create takes an exclusive flock(2) on dir, held until Close, and fails
// with an error wrapping [ErrLocked] if another Writer holds it.
func Create(dir string, opt Options) (*Writer, error) {
	w, err := create(dir, opt.normalize())
	if err != nil {
		return nil, fmt.Errorf("create journal: %w", err)
	}
	return w, nil
}

func create(dir string, opt Options) (*Writer, error) {
	// A directory made here is empty: nothing to recover.
	fresh := opt.New || os.Mkdir(dir, 0o700) == nil
	if !fresh {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if !opt.New {
		// One writer per journal: an exclusive, non-blocking flock.
		if err := fsutil.TryLock(d, true); err != nil {
			d.Close()
			if errors.Is(err, fsutil.ErrLocked) {
				err = ErrLocked
			}
			return nil, err
		}
	}
	w := &Writer{
		dir:      dir,
		opt:      opt,
		dirf:     d,
		lastSync: time.Now(),
	}
	if err := w.recover(fresh); err != nil {
		if w.f != nil {
			w.f.Close()
		}
		d.Close()
		return nil, err
	}
	return w, nil
}

// recover loads the segments in dir, repairing a torn end, or starts a new
// journal (without looking when the directory is fresh).
func (w *Writer) recover(fresh bool) error {
	var seqs []int
	if !fresh {
		var err error
		if seqs, err = listSegments(w.dir); err != nil {
			return err
		}
	}
	changed := false
	for i, seq := range seqs {
		path := filepath.Join(w.dir, segName(seq))
		c, err := checkSegment(seq, path)
		if err != nil {
			return err
		}
		if c.valid && len(w.segs) > 0 && c.meta.start < w.cursor.Load() {
			c.valid = false // overlaps the segment before
		}
		if c.valid {
			if c.torn {
				if err := os.Truncate(path, c.info.size); err != nil {
					return err
				}
				// Its index may describe the records cut off.
				if err := os.Remove(filepath.Join(w.dir, idxName(seq))); err != nil && !isNotExist(err) {
					return err
				}
			}
			w.segs = append(w.segs, c.info)
			w.meta = c.meta
			w.cursor.Store(c.end)
		} else if err := removeSegment(w.dir, seq); err != nil {
			return err
		}
		if !c.valid || c.torn {
			for _, later := range seqs[i+1:] {
				if err := removeSegment(w.dir, later); err != nil {
					return err
				}
			}
			changed = true
			break
		}
	}
	if len(w.segs) == 0 {
		// The first segment is made by the first record: a command that
		// prints nothing costs no file.
		w.meta = segMeta{headLimit: w.opt.HeadBytes}
		w.cursor.Store(0)
		return nil
	}

	// Finish drops a crash interrupted: the last segment record already
	// counts them.
	if w.meta.droppedBytes > 0 {
		tailStart := w.meta.headLimit + w.meta.droppedBytes
		var kept []segInfo
		for _, s := range w.segs[:len(w.segs)-1] {
			if s.start >= w.meta.headLimit && s.start < tailStart {
				if err := removeSegment(w.dir, s.seq); err != nil {
					return err
				}
				changed = true
				continue
			}
			kept = append(kept, s)
		}
		w.segs = append(kept, w.segs[len(w.segs)-1])
	}

	last := w.segs[len(w.segs)-1]
	f, err := os.OpenFile(filepath.Join(w.dir, segName(last.seq)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	w.f = f
	w.resumeIndex()
	if changed {
		w.dirty, w.dirDirty = true, true
		return w.syncLocked()
	}
	return nil
}

// resumeIndex establishes the line index of a resumed journal, rewriting
// the index files that had to be rebuilt, and the state to go on from.
// If it cannot, the writer stops indexing: readers then find no index for
// the new records and read the journal.
func (w *Writer) resumeIndex() {
	seqs := make([]int, len(w.segs))
	for i, s := range w.segs {
		seqs[i] = s.seq
	}
	segs, err := loadIndexes(w.dir, seqs)
	if err != nil {
		w.noIndex = true
		return
	}
	last := segs[len(segs)-1]
	for _, si := range segs {
		if !si.built {
			continue
		}
		if si == last {
			si.seal = nil // still open
		}
		writeIndex(w.dir, si)
	}
	m := last.marks[len(last.marks)-1]
	end, err := scanIndex(w.dir, last.seq, m, -1, nil)
	if err != nil || end.cursor != w.cursor.Load() {
		w.noIndex = true
		return
	}
	w.ls, w.ixOff = end, m.off
}

// removeSegment deletes segment seq and its index; a file already gone is
// not an error.
func removeSegment(dir string, seq int) error {
	err := os.Remove(filepath.Join(dir, segName(seq)))
	if isNotExist(err) {
		err = nil
	}
	if ierr := os.Remove(filepath.Join(dir, idxName(seq))); ierr != nil && !isNotExist(ierr) && err == nil {
		err = ierr
	}
	return err
}

// checked is what checkSegment found in a segment.
type checked struct {
	info  segInfo // size: the bytes up to the end of the last valid record
	meta  segMeta
	end   int64 // cursor after the last valid record
	valid bool  // it starts with a valid segment record
	torn  bool  // invalid bytes follow the last valid record
}

// checkSegment scans segment seq for recover.
func checkSegment(seq int, path string) (c checked, err error) {
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	sc := scanFile(f)
	defer sc.done()
	var lines int64
	for sc.next() {
		if t := sc.rec.typ; t == recStdout || t == recStderr {
			lines += int64(bytes.Count(sc.rec.payload, []byte{'\n'}))
		}
	}
	if sc.err != nil {
		return c, sc.err
	}
	return checked{
		info:  segInfo{seq: seq, start: sc.meta.start, size: sc.off, lines: lines},
		meta:  sc.meta,
		end:   sc.pos,
		valid: sc.n > 0,
		torn:  sc.bad,
	}, nil
}

// createSegment creates segment seq holding its segment record.
func (w *Writer) createSegment(seq int, m segMeta) (*os.File, error) {
	path := filepath.Join(w.dir, segName(seq))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	w.buf = appendRecord(w.buf[:0], recSegment, m.start, time.Now().UnixNano(), encodeSegMeta(m))
	if _, err := f.Write(w.buf); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	os.Remove(filepath.Join(w.dir, idxName(seq))) // a stale one
	w.ixOff = 0
	s := w.ls
	s.off, s.cursor = 0, m.start
	if seq == 1 {
		w.ixFirst = &s
	} else {
		w.index(seq, ixCheck, s)
	}
	return f, nil
}

// index appends an entry to segment seq's index file. The index is a cache
// that readers check and rebuild: a failed write costs only speed.
func (w *Writer) index(seq int, kind uint8, s lineState) {
	if w.noIndex {
		return
	}
	f, err := os.OpenFile(filepath.Join(w.dir, idxName(seq)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	var b [2 * ixLen]byte
	e := b[:0]
	if w.ixFirst != nil && seq == 1 {
		e = encodeEntry(e, ixCheck, *w.ixFirst)
		w.ixFirst = nil
	}
	f.Write(encodeEntry(e, kind, s))
	f.Close()
}

// checkpoint writes a checkpoint before the record about to be written,
// if the last one is indexEvery bytes back.
func (w *Writer) checkpoint() {
	seg := &w.segs[len(w.segs)-1]
	if seg.size-w.ixOff < indexEvery {
		return
	}
	w.ixOff = seg.size
	s := w.ls
	s.off, s.cursor = seg.size, w.cursor.Load()
	w.index(seg.seq, ixCheck, s)
}

// Append records p as output of stream s (Stdout or Stderr) and returns the
// cursor after it. p may be split into several records. Append fsyncs if
// Options.SyncInterval has passed since the last fsync, and starts new
// segments and applies the cap as needed. On error, end tells how much of p
// was recorded. Append does not retain p.
func (w *Writer) Append(s Stream, p []byte) (end int64, err error) {
	if s != Stdout && s != Stderr {
		return w.Cursor(), fmt.Errorf("append journal: invalid stream %d", s)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	pos := w.cursor.Load()
	if err := w.usable(); err != nil {
		return pos, fmt.Errorf("append journal: %w", err)
	}
	ts := time.Now().UnixNano()
	for len(p) > 0 {
		room, err := w.prepare(len(p))
		if err != nil {
			return pos, fmt.Errorf("append journal: %w", err)
		}
		n := min(len(p), room)
		if rest := w.meta.headLimit - pos; rest > 0 && rest < int64(n) {
			n = int(rest) // the head ends exactly at headLimit
		}
		w.checkpoint()
		if err := w.writeRecord(uint8(s), pos, ts, p[:n]); err != nil {
			return pos, fmt.Errorf("append journal: %w", err)
		}
		w.ls.feed(p[:n])
		if seg := &w.segs[len(w.segs)-1]; seg.start >= w.meta.headLimit {
			seg.lines += int64(bytes.Count(p[:n], []byte{'\n'}))
		}
		pos += int64(n)
		w.cursor.Store(pos)
		p = p[n:]
	}
	if err := w.maybeSync(); err != nil {
		return pos, fmt.Errorf("append journal: %w", err)
	}
	return pos, nil
}

// AppendInput records p as agent input at the current cursor, which it does
// not move. p may be split into several records.
func (w *Writer) AppendInput(p []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return fmt.Errorf("append journal input: %w", err)
	}
	ts := time.Now().UnixNano()
	for len(p) > 0 {
		room, err := w.prepare(len(p))
		if err != nil {
			return fmt.Errorf("append journal input: %w", err)
		}
		n := min(len(p), room)
		w.checkpoint()
		if err := w.writeRecord(recInput, w.cursor.Load(), ts, p[:n]); err != nil {
			return fmt.Errorf("append journal input: %w", err)
		}
		p = p[n:]
	}
	if err := w.maybeSync(); err != nil {
		return fmt.Errorf("append journal input: %w", err)
	}
	return nil
}

// AppendEnd records the session's end state p (at most MaxRecordPayload
// bytes, opaque to the journal) at the current cursor, for [ReadEnd]: a
// second copy of what the session's exit record says, which survives the
// loss of that file. It does not move the cursor.
func (w *Writer) AppendEnd(p []byte) error {
	if len(p) > MaxRecordPayload {
		return fmt.Errorf("append journal end: %d bytes is over %d", len(p), MaxRecordPayload)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return fmt.Errorf("append journal end: %w", err)
	}
	if _, err := w.prepare(len(p)); err != nil {
		return fmt.Errorf("append journal end: %w", err)
	}
	if err := w.writeRecord(recEnd, w.cursor.Load(), time.Now().UnixNano(), p); err != nil {
		return fmt.Errorf("append journal end: %w", err)
	}
	return w.maybeSync()
}

// Cursor returns the output end: the number of output bytes appended over
// the journal's life. It does not block on Append.
func (w *Writer) Cursor() int64 { return w.cursor.Load() }

// Stat describes the journal from the writer's memory, without disk I/O.
func (w *Writer) Stat() Info {
	w.mu.Lock()
	defer w.mu.Unlock()
	info := w.meta.info(w.cursor.Load())
	info.Segments = len(w.segs)
	for _, s := range w.segs {
		info.Bytes += s.size
	}
	return info
}

// Trim lowers the cap to maxBytes and applies it at once: the oldest
// segments after the head are deleted as they would be by the cap (the
// dropped range grows; readers see the gap). maxBytes is raised to at
// least the head plus two segments, and a Trim never raises the cap. It
// returns the bytes on disk before and after.
func (w *Writer) Trim(maxBytes int64) (before, after int64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	size := func() (n int64) {
		for _, s := range w.segs {
			n += s.size
		}
		return n
	}
	before = size()
	if err := w.usable(); err != nil {
		return before, before, fmt.Errorf("trim journal: %w", err)
	}
	maxBytes = max(maxBytes, w.meta.headLimit+2*w.opt.SegmentBytes)
	if maxBytes >= w.opt.MaxBytes {
		return before, before, nil
	}
	w.opt.MaxBytes = maxBytes
	if before > maxBytes {
		if err := w.roll(); err != nil {
			return before, size(), fmt.Errorf("trim journal: %w", err)
		}
	}
	return before, size(), nil
}

// Sync fsyncs every segment written since the last fsync and the directory.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("sync journal: %w", ErrClosed)
	}
	if err := w.syncLocked(); err != nil {
		return fmt.Errorf("sync journal: %w", err)
	}
	return nil
}

// Close fsyncs the journal, closes its files and releases the lock. Later
// calls of any method return an error wrapping ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("close journal: %w", ErrClosed)
	}
	w.closed = true
	err := errors.Join(w.syncLocked(), w.closeFile(), w.dirf.Close())
	if err != nil {
		return fmt.Errorf("close journal: %w", err)
	}
	return nil
}

// CloseUnsynced closes the journal without fsyncing it: for a journal
// whose directory is already removed, where a sync buys nothing.
func (w *Writer) CloseUnsynced() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("close journal: %w", ErrClosed)
	}
	w.closed = true
	if err := errors.Join(w.closeFile(), w.dirf.Close()); err != nil {
		return fmt.Errorf("close journal: %w", err)
	}
	return nil
}

// closeFile closes the current segment, if the journal has one.
func (w *Writer) closeFile() error {
	if w.f == nil {
		return nil
	}
	return w.f.Close()
}

func (w *Writer) usable() error {
	if w.closed {
		return ErrClosed
	}
	return w.err
}

// prepare makes room for a record of up to want payload bytes, starting a
// new segment if the current one is full or ends the head, and returns the
// largest payload the current segment takes.
func (w *Writer) prepare(want int) (int, error) {
	if w.f == nil {
		f, err := w.createSegment(1, w.meta)
		if err != nil {
			return 0, err
		}
		w.f = f
		w.segs = []segInfo{{seq: 1, size: segRecordLen}}
		w.dirty, w.dirDirty = true, true
	}
	seg := &w.segs[len(w.segs)-1]
	room := w.opt.SegmentBytes - seg.size - overhead
	endsHead := seg.start < w.meta.headLimit && w.cursor.Load() >= w.meta.headLimit
	if endsHead || room < int64(min(want, MaxRecordPayload, minSplit)) {
		if err := w.roll(); err != nil {
			return 0, err
		}
		seg = &w.segs[len(w.segs)-1]
		room = w.opt.SegmentBytes - seg.size - overhead
	}
	return int(min(room, MaxRecordPayload)), nil
}

// writeRecord appends one record to the current segment.
func (w *Writer) writeRecord(typ uint8, cursor, ts int64, p []byte) error {
	w.buf = appendRecord(w.buf[:0], typ, cursor, ts, p)
	seg := &w.segs[len(w.segs)-1]
	n, err := w.f.Write(w.buf)
	if err != nil {
		// Take back a partial record so the next one follows a valid one.
		if n > 0 {
			if terr := w.f.Truncate(seg.size); terr != nil {
				w.err = fmt.Errorf("segment %s may end in a torn record: %w", segName(seg.seq), terr)
			}
		}
		return err
	}
	seg.size += int64(n)
	w.dirty = true
	return nil
}

// roll starts the next segment and, to keep the head, the tail and a full
// new segment within MaxBytes, deletes the oldest segments after the head.
// The new segment's record carries the new drop totals and is written
// before anything is deleted.
func (w *Writer) roll() error {
	pos := w.cursor.Load()
	m := w.meta
	m.start = pos
	headEnd := min(m.headLimit, pos)
	tail := 0 // index of the first segment after the head
	for tail < len(w.segs) && w.segs[tail].start < m.headLimit {
		tail++
	}
	ndrop := 0
	for tail+ndrop < len(w.segs) {
		tailStart := w.segs[tail+ndrop].start
		if headEnd+(pos-tailStart)+w.opt.SegmentBytes <= w.opt.MaxBytes {
			break
		}
		next := pos
		if tail+ndrop+1 < len(w.segs) {
			next = w.segs[tail+ndrop+1].start
		}
		m.droppedBytes += next - tailStart
		m.droppedLines += w.segs[tail+ndrop].lines
		ndrop++
	}

	cur := w.segs[len(w.segs)-1]
	seal := w.ls
	seal.off, seal.cursor = cur.size, pos
	f, err := w.createSegment(cur.seq+1, m)
	if err != nil {
		return err
	}
	if w.dirty {
		w.unsynced = append(w.unsynced, cur.seq)
	}
	w.index(cur.seq, ixSeal, seal)
	closeErr := w.f.Close()
	w.f, w.meta = f, m
	w.dirty, w.dirDirty = true, true
	w.segs = append(w.segs, segInfo{seq: cur.seq + 1, start: pos, size: segRecordLen})

	var rmErr error
	for _, s := range w.segs[tail : tail+ndrop] {
		if err := removeSegment(w.dir, s.seq); err != nil && rmErr == nil {
			rmErr = err
		}
	}
	w.segs = slices.Delete(w.segs, tail, tail+ndrop)
	return errors.Join(closeErr, rmErr)
}

// maybeSync fsyncs if SyncInterval has passed since the last fsync.
func (w *Writer) maybeSync() error {
	if w.opt.SyncInterval > 0 && time.Since(w.lastSync) >= w.opt.SyncInterval {
		return w.syncLocked()
	}
	return nil
}

// syncLocked fsyncs the current segment, the segments closed since the last
// fsync (reopened by name; ones the cap deleted are skipped) and the
// directory.
func (w *Writer) syncLocked() error {
	var errs []error
	if w.dirty {
		if err := w.f.Sync(); err != nil {
			errs = append(errs, err)
		} else {
			w.dirty = false
		}
	}
	for _, seq := range w.unsynced {
		f, err := os.Open(filepath.Join(w.dir, segName(seq)))
		if isNotExist(err) {
			continue
		}
		if err == nil {
			err = f.Sync()
			f.Close()
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	w.unsynced = w.unsynced[:0]
	if w.dirDirty {
		if err := syncDir(w.dirf); err != nil {
			errs = append(errs, err)
		} else {
			w.dirDirty = false
		}
	}
	w.lastSync = time.Now()
	return errors.Join(errs...)
}
