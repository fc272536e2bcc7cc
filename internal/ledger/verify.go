package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Report is the result of [Verify]. It encodes to the JSON of `POST /v1/ledger/verify`.
type Report struct {
	OK      bool   `json:"ok"`
	Records int64  `json:"records"` // records verified (before the break, if broken)
	Files   int    `json:"files"`   // ledger files found
	Head    string `json:"head"`    // hash of the last verified record; ZeroHash if none

	// When not OK: the seq at which the chain breaks (the seq the record at File:Line
	// should have had), where, and why. Line counts from 1; it is 0 when the problem is
	// HEAD itself, and File is then "HEAD".
	BrokenAt int64  `json:"brokenAt,omitempty"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// String returns the text `conch ledger verify` prints (policy.md §12):
// "ok: <N> records in <F> files; head <hash>" or
// "broken at seq <n> (<file>:<line>): <reason>".
func (r Report) String() string {
	if r.OK {
		return fmt.Sprintf("ok: %d records in %d files; head %s", r.Records, r.Files, r.Head)
	}
	where := r.File
	if r.Line > 0 {
		where = fmt.Sprintf("%s:%d", r.File, r.Line)
	}
	return fmt.Sprintf("broken at seq %d (%s): %s", r.BrokenAt, where, r.Reason)
}

// Verify checks the ledger of a conch home: every record's hash, seq contiguity from 1
// and prev links across files, then HEAD against the last record. It detects edited,
// removed, reordered and inserted records, torn (incomplete) lines and records removed
// from the end. HEAD may lag behind the log (a crash between a record's fsync and HEAD's
// update) as long as it names a record of the chain. A home without a ledger is an empty,
// intact ledger.
//
// A damaged ledger is reported in the Report; the error is only for failures to read. It
// holds the append lock shared while it reads, so a concurrent Append is never seen half
// written.
func Verify(home string) (Report, error) {
	dir := Dir(home)
	rep := Report{Head: ZeroHash}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		rep.OK = true
		return rep, nil
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return rep, fmt.Errorf("verify ledger: %w", err)
	}
	defer lock.Close()
	if err := flock(lock, false); err != nil {
		return rep, fmt.Errorf("verify ledger: %w", err)
	}

	files, err := listFiles(dir)
	if err != nil {
		return rep, fmt.Errorf("verify ledger: %w", err)
	}
	rep.Files = len(files)
	h, hasHead, herr := readHead(dir)

	var (
		seq      int64 // last verified seq
		prev     = ZeroHash
		lastFile string
		lastLine int
	)
	broken := func(file string, line int, reason string) (Report, error) {
		rep.BrokenAt, rep.File, rep.Line, rep.Reason = seq+1, file, line, reason
		return rep, nil
	}
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return rep, fmt.Errorf("verify ledger: %w", err)
		}
		br := bufio.NewReaderSize(f, 64<<10)
		lineNo, off := 0, int64(0)
		for {
			line, err := br.ReadBytes('\n')
			if err == io.EOF && len(line) == 0 {
				break
			}
			lineNo++
			if err == io.EOF {
				f.Close()
				return broken(name, lineNo, "torn record (incomplete last line)")
			}
			if err != nil {
				f.Close()
				return rep, fmt.Errorf("verify ledger: %w", err)
			}
			m, err := parseRecord(line)
			if err == nil {
				err = checkLink(m, seq+1, prev)
			}
			if err != nil {
				f.Close()
				return broken(name, lineNo, err.Error())
			}
			off += int64(len(line))
			seq, prev = seqOf(m), m["hash"].(string)
			rep.Records, rep.Head = seq, prev
			lastFile, lastLine = name, lineNo
			// HEAD must name a record of the chain, at its position.
			if hasHead && seq == h.Seq && (prev != h.Hash || name != h.File || off != h.Size) {
				f.Close()
				rep.BrokenAt, rep.File, rep.Reason = seq, headName, fmt.Sprintf("HEAD does not match seq %d", seq)
				return rep, nil
			}
		}
		f.Close()
		if lineNo == 0 {
			lastFile, lastLine = name, 0
		}
	}

	switch {
	case herr != nil:
		rep.BrokenAt, rep.File, rep.Reason = seq, headName, herr.Error()
		return rep, nil
	case !hasHead && seq > 0:
		rep.BrokenAt, rep.File, rep.Reason = seq, headName, "HEAD missing"
		return rep, nil
	case hasHead && h.Seq > seq:
		if lastFile == "" {
			lastFile = fileName(1)
		}
		return broken(lastFile, lastLine+1, fmt.Sprintf("truncated: HEAD is at seq %d, the last record is seq %d", h.Seq, seq))
	}
	rep.OK = true
	return rep, nil
}
