package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// damagedJournal writes lines of numbered output in small appends over
// several segments and returns the output and the segment files.
func damagedJournal(t *testing.T, dir string) (output, []string) {
	t.Helper()
	w, err := Create(dir, Options{SegmentBytes: 4 << 10, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	var want output
	for i := range 300 {
		want.append(t, w, Stream(1+i%2), fmt.Appendf(nil, "line %04d of the damaged journal\n", i))
	}
	// A finished session's journal ends with its end record, so even
	// its last output record is followed by one to resynchronise on.
	if err := w.AppendEnd([]byte(`{"state":"exited"}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seqs, err := listSegments(dir)
	if err != nil || len(seqs) < 3 {
		t.Fatalf("segments %v, %v: want at least 3", seqs, err)
	}
	var paths []string
	for _, seq := range seqs {
		paths = append(paths, filepath.Join(dir, segName(seq)))
	}
	return want, paths
}

// checkDamaged reads the whole journal and checks that every byte it
// delivers is the byte written at that cursor (resynchronisation never
// invents output), that Read, ReadTail and Stat agree on the end, and that
// at most maxLost bytes are missing. It returns the bytes missing.
func checkDamaged(t *testing.T, dir string, want output, wantEnd, maxLost int64) int64 {
	t.Helper()
	var got int64
	end, err := Read(dir, 0, func(c Chunk) error {
		if c.Cursor+int64(len(c.Data)) > int64(len(want.data)) || !bytes.Equal(c.Data, want.data[c.Cursor:c.Cursor+int64(len(c.Data))]) {
			return fmt.Errorf("chunk at %d (%d bytes) differs from what was written", c.Cursor, len(c.Data))
		}
		if want.runAt(c.Cursor).s != c.Stream {
			return fmt.Errorf("chunk at %d: stream %v", c.Cursor, c.Stream)
		}
		got += int64(len(c.Data))
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if end != wantEnd {
		t.Fatalf("Read end = %d, want %d", end, wantEnd)
	}
	info, err := Stat(dir)
	if err != nil || info.End != wantEnd {
		t.Fatalf("Stat = %+v, %v; want end %d", info, err, wantEnd)
	}
	_, tend, err := ReadTail(dir, 100, func(Chunk) error { return nil })
	if err != nil || tend != wantEnd {
		t.Fatalf("ReadTail end = %d, %v; want %d", tend, err, wantEnd)
	}
	lost := wantEnd - got
	if lost > maxLost {
		t.Fatalf("lost %d bytes, want at most %d", lost, maxLost)
	}
	return lost
}

func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	ents, _ := os.ReadDir(from)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// TestDamageResync flips one byte at every offset of a segment in the
// middle and of the last one: a read skips the damaged record only (no
// more than one record's output is lost, nothing is invented) and goes on
// to the end of the journal.
func TestDamageResync(t *testing.T) {
	src := t.TempDir()
	want, paths := damagedJournal(t, src)
	const lineLen = int64(len("line 0000 of the damaged journal\n"))
	for _, which := range []int{1, len(paths) - 1} {
		orig, err := os.ReadFile(paths[which])
		if err != nil {
			t.Fatal(err)
		}
		dir := copyDir(t, src)
		path := filepath.Join(dir, filepath.Base(paths[which]))
		lostAny := false
		for off := range len(orig) {
			b := bytes.Clone(orig)
			b[off] ^= 0x5a
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			end := int64(len(want.data))
			lost := checkDamaged(t, dir, want, end, lineLen)
			lostAny = lostAny || lost > 0
		}
		if !lostAny {
			t.Fatalf("segment %d: no flip lost a byte: the test damages nothing", which)
		}
	}
}

// TestDamageTruncate cuts a middle segment and the last one at many
// offsets: a middle one loses only what was cut (the read goes on with the
// next segment); the last one ends the journal at its last whole record.
func TestDamageTruncate(t *testing.T) {
	src := t.TempDir()
	want, paths := damagedJournal(t, src)
	for _, which := range []int{1, len(paths) - 1} {
		orig, err := os.ReadFile(paths[which])
		if err != nil {
			t.Fatal(err)
		}
		dir := copyDir(t, src)
		path := filepath.Join(dir, filepath.Base(paths[which]))
		for _, cut := range []int{0, 1, headerLen, segRecordLen, segRecordLen + 7, len(orig) / 2, len(orig) - 1} {
			if err := os.WriteFile(path, orig[:cut], 0o600); err != nil {
				t.Fatal(err)
			}
			wantEnd := int64(len(want.data))
			if which == len(paths)-1 {
				// The end of the last segment cannot be told from a
				// record being written: the journal ends before it.
				wantEnd = lastRecordEnd(t, orig[:cut], orig)
			}
			checkDamaged(t, dir, want, wantEnd, int64(len(orig)))
		}
	}
}

// lastRecordEnd returns the cursor after the last whole record of the cut
// segment b, or, if none is left, the start of the uncut segment orig (the
// journal then ends where the segment before does).
func lastRecordEnd(t *testing.T, b, orig []byte) int64 {
	t.Helper()
	scan := func(b []byte) *scanner {
		path := filepath.Join(t.TempDir(), "seg")
		os.WriteFile(path, b, 0o600)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := scanFile(f)
		defer sc.done()
		for sc.next() {
		}
		return sc
	}
	if sc := scan(b); sc.n > 0 {
		return sc.pos
	}
	return scan(orig).meta.start
}

// TestDamageNoFalseRecord puts a whole segment of another journal, full of
// valid records, inside a command's output, then damages the record that
// holds it: the reader must not take the copied records for real ones.
func TestDamageNoFalseRecord(t *testing.T) {
	other := t.TempDir()
	ow, err := Create(other, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		ow.Append(Stdout, fmt.Appendf(nil, "inner %d\n", i))
	}
	ow.Close()
	inner, err := os.ReadFile(filepath.Join(other, segName(1)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := Create(dir, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	var want output
	want.append(t, w, Stdout, []byte("before\n"))
	want.append(t, w, Stdout, inner)
	want.append(t, w, Stdout, []byte("after\n"))
	w.Close()
	path := filepath.Join(dir, segName(1))
	orig, _ := os.ReadFile(path)
	// The second record (after the segment record and "before") holds the
	// copy; damage its header, then its first payload bytes.
	second := segRecordLen + overhead + len("before\n")
	for _, off := range []int{second, second + 3, second + headerLen, second + headerLen + 30} {
		b := bytes.Clone(orig)
		b[off] ^= 0xff
		os.WriteFile(path, b, 0o600)
		checkDamaged(t, dir, want, int64(len(want.data)), int64(len(inner)))
	}
}

// TestReadEnd finds the end record past a damaged output record, and
// reports none for a journal without one.
func TestReadEnd(t *testing.T) {
	src := t.TempDir()
	_, paths := damagedJournal(t, src)
	last := paths[len(paths)-1]
	b, _ := os.ReadFile(last)
	b[segRecordLen+5] ^= 1
	os.WriteFile(last, b, 0o600)
	p, _, ok, err := ReadEnd(src)
	if err != nil || !ok || string(p) != `{"state":"exited"}` {
		t.Fatalf("ReadEnd = %q, %v, %v", p, ok, err)
	}
	dir := t.TempDir()
	w, _ := Create(dir, Options{})
	w.Append(Stdout, []byte("x\n"))
	w.Close()
	if _, _, ok, err := ReadEnd(dir); ok || err != nil {
		t.Fatalf("ReadEnd without an end record = %v, %v", ok, err)
	}
}

// TestDamageResyncLargeAppends: one Append split over records and over a
// segment start (its records are older than the segment record): a damaged
// record among them costs only that record.
func TestDamageResyncLargeAppends(t *testing.T) {
	src := t.TempDir()
	w, err := Create(src, Options{SegmentBytes: 128 << 10, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	var want output
	for i := range 6 {
		// 150 KiB: three records, and a segment starts inside it.
		want.append(t, w, Stdout, bytes.Repeat(fmt.Appendf(nil, "big append %d ...\n", i), 150<<10/18))
	}
	w.AppendEnd([]byte("{}"))
	w.Close()
	seqs, _ := listSegments(src)
	for _, seq := range seqs[1:] {
		orig, _ := os.ReadFile(filepath.Join(src, segName(seq)))
		dir := copyDir(t, src)
		path := filepath.Join(dir, segName(seq))
		// The payload of the first record after the segment record, and
		// its header.
		for _, off := range []int{segRecordLen + headerLen + 10, segRecordLen + 3} {
			b := bytes.Clone(orig)
			b[off] ^= 0x10
			os.WriteFile(path, b, 0o600)
			lost := checkDamaged(t, dir, want, int64(len(want.data)), int64(len(orig)))
			if first := recordLenAt(orig, segRecordLen) - overhead; lost > int64(first) {
				t.Fatalf("segment %d offset %d: lost %d bytes, the damaged record held %d", seq, off, lost, first)
			}
		}
	}
}

func recordLenAt(b []byte, off int) int { return recordLen(b[off:]) }
