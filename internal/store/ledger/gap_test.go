package ledger

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestGapRecord: records a Ledger fails to write (ENOSPC injected into its file
// writes) are counted, and the next write that succeeds is preceded by a gap record
// that Verify reports; the failures of a batch are counted by record, across batches
// and partial batches.
func TestGapRecord(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches []int // records per failing call
	}{
		{"one append", []int{1}},
		{"three appends", []int{1, 1, 1}},
		{"a batch", []int{9}},
		{"mixed", []int{4, 1, 2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			l := openLedger(t, home, Options{})
			appendN(t, l, 3)
			l.appendFile = func(string, int64, []byte) error {
				return &os.PathError{Op: "write", Path: "ledger", Err: syscall.ENOSPC}
			}
			want := int64(0)
			for _, n := range tc.batches {
				batch := make([]Record, n)
				for i := range batch {
					batch[i] = Record{Type: TypeNode, Fields: map[string]any{"action": "pair", "nodeId": fmt.Sprint(i)}}
				}
				got, err := l.AppendBatch(batch)
				if !errors.Is(err, syscall.ENOSPC) || len(got) != 0 {
					t.Fatalf("a failing write: %d records, %v", len(got), err)
				}
				want += int64(n)
			}
			if g := l.Dropped(); g.Dropped != want || !strings.Contains(g.Reason, "no space left on device") {
				t.Fatalf("dropped %+v, want %d", g, want)
			}
			l.appendFile = appendSync
			rec, err := l.Append(Record{Type: TypeNode, Fields: map[string]any{"action": "pair"}})
			if err != nil || rec.Seq != 5 || rec.Type != TypeNode {
				t.Fatalf("append after space returned: %+v %v", rec, err)
			}
			if g := l.Dropped(); g.Dropped != 0 {
				t.Fatalf("gap still pending: %+v", g)
			}
			rep, err := Verify(home)
			if err != nil || !rep.OK || len(rep.Gaps) != 1 || rep.Dropped != want || rep.Gaps[0].Seq != 4 || rep.Complete() {
				t.Fatalf("verify: %s %+v %v", rep, rep, err)
			}
			if !strings.HasPrefix(rep.String(), fmt.Sprintf("gaps: %d records dropped in 1 gaps (first at seq 4, ", want)) {
				t.Fatalf("verify line: %s", rep)
			}
			recs, _ := Tail(home, 0, Filter{})
			if len(recs) != 5 || recs[3].Type != TypeGap || !strings.Contains(recs[3].String(), "gap") {
				t.Fatalf("tail: %v", recs)
			}
		})
	}
}

// TestGapRecordOnClose: a Ledger that closes with lost records tries once more to write
// the gap record, and says so when it cannot.
func TestGapRecordOnClose(t *testing.T) {
	home := t.TempDir()
	l, err := Open(home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1)
	fail := true
	l.appendFile = func(path string, size int64, buf []byte) error {
		if fail {
			return syscall.EIO
		}
		return appendSync(path, size, buf)
	}
	l.Append(Record{Type: TypeNode})
	fail = false
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if rep, _ := Verify(home); len(rep.Gaps) != 1 || rep.Records != 2 {
		t.Fatalf("verify after close: %s", rep)
	}

	// Records lost and not recordable before the process ends are noted in HEAD
	// (rewritten in place: no new space), reported by Verify, and recorded by the next
	// appender, here another Ledger as after a restart.
	l, _ = Open(home, Options{})
	l.appendFile = func(string, int64, []byte) error { return syscall.ENOSPC }
	l.Append(Record{Type: TypeNode})
	l.AppendBatch([]Record{{Type: TypeNode}, {Type: TypeNode}})
	if err := l.Close(); err != nil {
		t.Fatalf("close with the gap noted in HEAD: %v", err)
	}
	rep, _ := Verify(home)
	if !rep.OK || len(rep.Gaps) != 2 || !rep.Gaps[1].Pending || rep.Gaps[1].Dropped != 3 || rep.Gaps[1].Seq != 3 {
		t.Fatalf("verify with a pending gap: %s %+v", rep, rep)
	}
	l = openLedger(t, home, Options{})
	if g := l.Dropped(); g.Dropped != 3 {
		t.Fatalf("a new Ledger sees %+v", g)
	}
	if r, err := l.Append(Record{Type: TypeNode}); err != nil || r.Seq != 4 {
		t.Fatalf("append after restart: %+v %v", r, err)
	}
	rep, _ = Verify(home)
	if !rep.OK || len(rep.Gaps) != 2 || rep.Gaps[1].Pending || rep.Gaps[1].Dropped != 3 || rep.Dropped != 4 {
		t.Fatalf("verify after the gap record: %s %+v", rep, rep)
	}

	// Without a HEAD (an empty ledger) the count can only stay in memory: Close says so.
	empty := t.TempDir()
	l, _ = Open(empty, Options{})
	l.appendFile = func(string, int64, []byte) error { return syscall.EIO }
	l.Append(Record{Type: TypeNode})
	if err := l.Close(); err == nil || !strings.Contains(err.Error(), "1 records were not written") {
		t.Fatalf("close with an unwritable gap: %v", err)
	}
}

// TestGapPartialBatch: a batch whose second file fails to write keeps the records of
// the first and counts the rest.
func TestGapPartialBatch(t *testing.T) {
	home := t.TempDir()
	l := openLedger(t, home, Options{RotateBytes: 400})
	calls := 0
	l.appendFile = func(path string, size int64, buf []byte) error {
		calls++
		if calls == 2 {
			return syscall.ENOSPC
		}
		return appendSync(path, size, buf)
	}
	var batch []Record
	for i := range 6 {
		batch = append(batch, Record{Type: TypeNode, Fields: map[string]any{"name": strings.Repeat("n", 150), "i": i}})
	}
	got, err := l.AppendBatch(batch)
	if err == nil || len(got) == 0 || len(got) == len(batch) {
		t.Fatalf("partial batch: %d written, %v", len(got), err)
	}
	if g := l.Dropped(); g.Dropped != int64(len(batch)-len(got)) {
		t.Fatalf("dropped %d, want %d", g.Dropped, len(batch)-len(got))
	}
	l.Append(Record{Type: TypeNode})
	if rep, _ := Verify(home); !rep.OK || rep.Dropped != int64(len(batch)-len(got)) || rep.Gaps[0].Seq != int64(len(got)+1) {
		t.Fatalf("verify: %s %+v", rep, rep)
	}
}

// TestGapFsyncFailure: records whose fsync (of the file, or of the directory of a new
// file) fails are reported lost, so they must not stay in the file either: the next
// append would otherwise find them after HEAD and adopt them, and the ledger would hold
// records its gap record says were lost.
func TestGapFsyncFailure(t *testing.T) {
	for _, rotate := range []int64{0, 1} { // 1: every record in a new file
		home := t.TempDir()
		l := openLedger(t, home, Options{RotateBytes: rotate})
		appendN(t, l, 2)
		var isNew bool
		l.appendFile = func(path string, size int64, buf []byte) error {
			return appendWith(path, size, buf, func(_ *os.File, n bool) error { isNew = n; return syscall.EIO })
		}
		if got, err := l.Append(Record{Type: TypeNode, Fields: map[string]any{"action": "pair", "nodeId": "lost"}}); !errors.Is(err, syscall.EIO) || got.Seq != 0 {
			t.Fatalf("rotate %d: append with a failing fsync: %+v %v", rotate, got, err)
		}
		if isNew != (rotate == 1) {
			t.Fatalf("rotate %d: the failing write was to a new file: %v", rotate, isNew)
		}
		l.appendFile = appendSync
		if _, err := l.Append(Record{Type: TypeNode, Fields: map[string]any{"action": "pair", "nodeId": "kept"}}); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(home)
		if err != nil || !rep.OK || rep.Dropped != 1 || rep.Records != 4 {
			t.Fatalf("rotate %d: verify: %s %v", rotate, rep, err)
		}
		recs, _ := Tail(home, 0, Filter{})
		for _, r := range recs {
			if strings.Contains(fmt.Sprint(r.Fields), "lost") {
				t.Fatalf("rotate %d: a record reported lost is in the ledger: %v", rotate, recs)
			}
		}
	}
}
