package ledger

import (
	"bufio"
	"cmp"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/base/fsutil"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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

	// Signed says whose signature on HEAD's checkpoint verified: "key" (the public key
	// given to [VerifyWith]), "home" (the home's own key, which whoever can write the
	// home can replace) or "" (HEAD is unsigned and no key was given). Checkpoint is
	// HEAD's checkpoint in text form, to keep elsewhere and pass back later; Unsigned
	// counts the records after it (left by a crash before HEAD's update, or added by
	// someone without the key: nothing tells them apart).
	Signed     string `json:"signed,omitempty"`
	Checkpoint string `json:"checkpoint,omitempty"`
	Unsigned   int64  `json:"unsigned,omitempty"`
	// Checkpoints counts the checkpoints given to VerifyWith that the ledger holds.
	Checkpoints int `json:"checkpoints,omitempty"`

	// Gaps are the gap records of the chain: records the ledger failed to write (a full
	// disk, an I/O error). An intact chain with gaps is OK but incomplete; Dropped is the
	// sum of their counts.
	Gaps    []GapAt `json:"gaps,omitempty"`
	Dropped int64   `json:"dropped,omitempty"`

	// Open lists the sessions whose exec record has no end record after
	// it, oldest first (at most maxOpenListed; OpenCount counts them
	// all): sessions still running, or whose end no engine has recorded
	// yet (the next engine that finds them ended does, marked observed).
	// An open session does not make the ledger fail.
	Open      []OpenSession `json:"open,omitempty"`
	OpenCount int           `json:"openCount,omitempty"`
}

// OpenSession is a session with an exec record and no end record.
type OpenSession struct {
	SessionID string `json:"sessionId"`
	Seq       int64  `json:"seq"` // of its exec record
	TS        string `json:"ts"`
}

// maxOpenListed bounds Report.Open.
const maxOpenListed = 100

// GapAt is a gap record found by [Verify], at seq Seq; or, Pending, records lost after
// seq Seq-1 that HEAD notes and the next append will record.
type GapAt struct {
	Seq     int64 `json:"seq"`
	Pending bool  `json:"pending,omitempty"`
	Gap
}

// VerifyOptions are the external evidence [VerifyWith] checks the ledger against. The
// zero value checks the ledger against itself and the home's own key.
type VerifyOptions struct {
	// PublicKey, when set, must have signed HEAD's checkpoint, and every signed
	// checkpoint in Checkpoints. Keep it off the machine (`conch ledger key` prints it).
	PublicKey ed25519.PublicKey
	// Checkpoints are checkpoints seen earlier (a verify's output, the forwarded log):
	// the ledger must still hold each one's record with its hash. A checkpoint beyond
	// the last record means records were removed from the end.
	Checkpoints []Checkpoint
}

// Details returns the lines `conch ledger verify` prints after [Report.String] for a
// verified ledger: "checkpoint <text> (signed by the given key | signed by the home's
// key | unsigned)", "<n> given checkpoints found" and "<u> records after the checkpoint
// are unsigned", each when it applies.
func (r Report) Details() []string {
	if !r.OK {
		return nil
	}
	var lines []string
	if r.Checkpoint != "" {
		by := map[string]string{"key": "signed by the given key", "home": "signed by the home's key", "": "unsigned"}[r.Signed]
		lines = append(lines, fmt.Sprintf("checkpoint %s (%s)", r.Checkpoint, by))
	}
	if r.Checkpoints > 0 {
		lines = append(lines, fmt.Sprintf("%d given checkpoints found", r.Checkpoints))
	}
	if r.Unsigned > 0 {
		lines = append(lines, fmt.Sprintf("%d records after the checkpoint are unsigned", r.Unsigned))
	}
	if r.OpenCount > 0 {
		lines = append(lines, fmt.Sprintf("%d sessions open (an exec record without an end record: running, or ended unrecorded):", r.OpenCount))
		for _, o := range r.Open {
			lines = append(lines, fmt.Sprintf("  open %s (exec at seq %d, %s)", o.SessionID, o.Seq, o.TS))
		}
		if r.OpenCount > len(r.Open) {
			lines = append(lines, fmt.Sprintf("  … and %d more", r.OpenCount-len(r.Open)))
		}
	}
	return lines
}

// Complete reports whether the ledger verified and has no gaps.
func (r Report) Complete() bool { return r.OK && len(r.Gaps) == 0 }

// String returns the line `conch ledger verify` prints first:
// "ok: <N> records in <F> files; head <hash>" or
// "broken at seq <n> (<file>:<line>): <reason>". A verified ledger with gaps reads
// "gaps: <D> records (or: an unknown number of records, <D> records and an unknown
// number) dropped in <G> gaps (first at seq <s>, <from> to <to>: <reason>);
// <N> records in <F> files; head <hash>" instead.
func (r Report) String() string {
	if r.OK && len(r.Gaps) > 0 {
		g := r.Gaps[0]
		dropped := fmt.Sprintf("%d records", r.Dropped)
		for _, x := range r.Gaps {
			if x.Unknown {
				dropped = "an unknown number of records"
				if r.Dropped > 0 {
					dropped = fmt.Sprintf("%d records and an unknown number", r.Dropped)
				}
				break
			}
		}
		return fmt.Sprintf("gaps: %s dropped in %d gaps (first at seq %d, %s to %s: %s); %d records in %d files; head %s",
			dropped, len(r.Gaps), g.Seq, g.FirstTS, g.LastTS, g.Reason, r.Records, r.Files, r.Head)
	}
	if r.OK && r.OpenCount > 0 {
		return fmt.Sprintf("ok: %d records in %d files; head %s; %d sessions open", r.Records, r.Files, r.Head, r.OpenCount)
	}
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
func Verify(home string) (Report, error) { return VerifyWith(home, VerifyOptions{}) }

// VerifyWith is [Verify] that also checks HEAD's signed checkpoint and the evidence in
// o. HEAD's checkpoint must verify with o.PublicKey or, without one, with the home's key
// (when the home has one); a HEAD without a signature fails when a key applies. Each of
// o.Checkpoints must name a record of the chain with its hash, and verify with the key
// when signed. Gap records are listed in the Report.
func VerifyWith(home string, o VerifyOptions) (Report, error) {
	dir := Dir(home)
	rep := Report{Head: ZeroHash}
	pub, signer := o.PublicKey, "key"
	if pub == nil {
		switch k, err := LoadKey(home); {
		case err == nil:
			pub, signer = k.Public().(ed25519.PublicKey), "home"
		case !errors.Is(err, fs.ErrNotExist):
			return rep, fmt.Errorf("verify ledger: %w", err)
		}
	}
	// Every checkpoint counts, several for one seq too: one of them spoofed (any
	// local user can write to syslog) must not displace a real one.
	want := map[int64][]Checkpoint{}
	var maxCkpt Checkpoint
	for _, c := range o.Checkpoints {
		if c.Sig != nil && !c.Valid(pub) {
			rep.BrokenAt, rep.File, rep.Reason = c.Seq, "checkpoint", fmt.Sprintf("the given checkpoint for seq %d: %v", c.Seq, ErrBadSignature)
			return rep, nil
		}
		want[c.Seq] = append(want[c.Seq], c)
		if c.Seq > maxCkpt.Seq {
			maxCkpt = c
		}
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if maxCkpt.Seq > 0 {
			rep.BrokenAt, rep.File, rep.Reason = 1, fileName(1), fmt.Sprintf("truncated: a checkpoint names seq %d, the ledger is empty", maxCkpt.Seq)
			return rep, nil
		}
		rep.OK = true
		return rep, nil
	}
	lock, _, err := openOwn(filepath.Join(dir, ".lock"), os.O_RDWR)
	if err != nil {
		return rep, fmt.Errorf("verify ledger: %w", err)
	}
	defer lock.Close()
	if err := fsutil.Lock(lock, false); err != nil {
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
		open     = map[string]OpenSession{}
		// the first gap record of unknown size (a HEAD rebuilt from the log)
		rebuilt                  GapAt
		rebuiltFile, rebuiltLine = "", 0
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
			for _, c := range want[seq] {
				if c.Hash != prev {
					f.Close()
					rep.BrokenAt, rep.File, rep.Line = seq, name, lineNo
					rep.Reason = fmt.Sprintf("record %d does not match the given checkpoint (rewritten)", seq)
					return rep, nil
				}
				rep.Checkpoints++
			}
			switch id, _ := m["sessionId"].(string); m["type"] {
			case TypeExec:
				ts, _ := m["ts"].(string)
				open[id] = OpenSession{SessionID: id, Seq: seq, TS: ts}
			case TypeEnd:
				delete(open, id)
			}
			if m["type"] == TypeGap {
				g := GapAt{Seq: seq}
				n, _ := m["dropped"].(json.Number)
				g.Dropped, _ = n.Int64()
				g.FirstTS, _ = m["firstTs"].(string)
				g.LastTS, _ = m["lastTs"].(string)
				g.Reason, _ = m["reason"].(string)
				g.Unknown = unknownSize(m, g.Gap)
				rep.Gaps = append(rep.Gaps, g)
				rep.Dropped += g.Dropped
				if g.Unknown && rebuilt.Seq == 0 {
					rebuilt, rebuiltFile, rebuiltLine = g, name, lineNo
				}
			}
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
	case maxCkpt.Seq > seq:
		if lastFile == "" {
			lastFile = fileName(1)
		}
		return broken(lastFile, lastLine+1, fmt.Sprintf("truncated: a given checkpoint names seq %d, the last record is seq %d", maxCkpt.Seq, seq))
	}
	// Against a saved key, a HEAD rebuilt from the log is a truncation whatever the
	// gap record says: the key signed the end the append found, not the end that was
	// there. A checkpoint given at or after the gap record's seq vouches for the log
	// from there (the operator saw it after the rebuild).
	if o.PublicKey != nil && rebuilt.Seq > 0 && maxCkpt.Seq < rebuilt.Seq {
		rep.BrokenAt, rep.File, rep.Line = rebuilt.Seq, rebuiltFile, rebuiltLine
		rep.Reason = fmt.Sprintf("truncated: an unknown number of records may have been removed before seq %d (%s); a checkpoint seen at or after seq %d vouches for the log from there",
			rebuilt.Seq, rebuilt.Reason, rebuilt.Seq)
		return rep, nil
	}
	if hasHead {
		ck := h.checkpoint()
		switch {
		case pub != nil && ck.Sig == nil:
			rep.BrokenAt, rep.File, rep.Reason = h.Seq, headName, "HEAD is not signed (rewritten by someone without the key?)"
			return rep, nil
		case pub != nil && !ck.Valid(pub):
			who := "the given public key"
			if signer == "home" {
				who = "the home's key"
			}
			rep.BrokenAt, rep.File, rep.Reason = h.Seq, headName, fmt.Sprintf("HEAD's checkpoint does not verify with %s (rewritten, or signed by another key)", who)
			return rep, nil
		case pub != nil:
			rep.Signed = signer
		}
		rep.Checkpoint, rep.Unsigned = ck.String(), seq-h.Seq
		if h.Lost != nil && h.Lost.Dropped > 0 && seq == h.Seq {
			rep.Gaps = append(rep.Gaps, GapAt{Seq: seq + 1, Pending: true, Gap: *h.Lost})
			rep.Dropped += h.Lost.Dropped
		}
	}
	rep.OK = true
	rep.OpenCount = len(open)
	for _, o := range open {
		rep.Open = append(rep.Open, o)
	}
	slices.SortFunc(rep.Open, func(a, b OpenSession) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(rep.Open) > maxOpenListed {
		rep.Open = rep.Open[:maxOpenListed]
	}
	return rep, nil
}
