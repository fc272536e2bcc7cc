// Package ledger is conch's approval ledger: an append-only, hash-chained
// log of every policy evaluation, approval request, decision, execution, end state, policy
// change, node change and patch, in $CONCH_HOME/ledger.
//
// # Format
//
// The ledger is a sequence of files ledger-NNNNNN.jsonl (six or more digits, from 000001),
// one record per line. Every record is a JSON object with the members v (1), seq
// (contiguous from 1 across files), ts (RFC 3339 UTC with milliseconds), type, agent, prev
// (the previous record's hash; 64 zeros for the first) and hash, plus the members of its
// type (see the Type constants). hash is the lowercase hex sha256 of the record without
// hash, serialised as RFC 8785 canonical JSON ([Canonical]); each line is itself the
// canonical form of the whole record. A new file is started when a record would take the
// current one past [Options.RotateBytes]; the chain continues across files.
//
// ledger/HEAD holds the last record's seq, hash, file and the file's size after it. It
// lets an appender find the tip without reading the log, and lets [Verify] notice records
// removed from the end.
//
// # Checkpoints, gaps and forwarding
//
// HEAD also holds a [Checkpoint] of its record signed with the home's Ed25519 key
// ([KeyFile]), so that cutting records off the end and rewriting HEAD to match needs the
// key; [VerifyWith] checks it against a public key and checkpoints kept elsewhere.
// Records a Ledger fails to write are counted, noted in HEAD and written as a TypeGap
// record before the next record that can be written. [Options.Forward] sends records and
// checkpoints to syslog or journald.
//
// # Concurrency and crash safety
//
// [Ledger.Append] holds an exclusive flock(2) on ledger/.lock while it finds the tip,
// writes and fsyncs the record and updates HEAD, so appenders in any number of processes
// never fork the chain. [Verify] takes the same lock shared. [Tail] takes no lock and
// ignores an incomplete last line (an append in progress).
//
// HEAD is updated (in place, without fsync) after the record is durable. If a crash leaves
// records after HEAD, the next Append checks that they continue the chain and moves HEAD to
// them; an incomplete last line after HEAD (a torn write that was never acknowledged) is
// truncated away. A HEAD that is missing, unreadable or not signed by the appender's key
// vouches for nothing: the next Append rebuilds the position from the log and writes a
// TypeGap record (dropped 0, the reason starting "HEAD") before signing a new HEAD, so
// that whatever was done to the end of the log stays visible. Any other damage makes Append
// fail with [ErrBroken] rather than extend a broken chain; `conch ledger verify` ([Verify])
// says where.
//
// Files are created 0600 and directories 0700. On systems without flock the caller must
// ensure a single appender.
package ledger

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/base/fsutil"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Record types and their members ("?" marks optional ones).
const (
	// TypeEvaluate: requestId, host, nodeId?, command, cwd, envKeys, envHash, security, ask,
	// askFallback, analysis (ok | reason), segments[{text, exe, realPath, sha256, verdict,
	// rule}], outcome (run|prompt|deny), elevated.
	TypeEvaluate = "evaluate"
	// TypeRequest: requestId, approvalId, slug, expiresAtMs, routes[].
	TypeRequest = "request"
	// TypeDecision: approvalId, decision (allow-once|allow-always|deny|timeout), decidedBy,
	// fallback?, persisted[].
	TypeDecision = "decision"
	// TypeExec: requestId, approvalId?, sessionId, host, hostReason?, nodeId?, argv,
	// pinned?, cwd, exe{path, sha256}, envHash, pty, timeoutMs, sandbox?.
	TypeExec = "exec"
	// TypeEnd: sessionId, state, exitCode, signal, killedBy, durationMs, outputBytes,
	// outputSha256, descendantsKilled.
	TypeEnd = "end"
	// TypePolicy: file, oldHash, newHash, by, added[], removed[].
	TypePolicy = "policy"
	// TypeNode: action (pair|approve|rename|remove), nodeId, name, by.
	TypeNode = "node"
	// TypePatch: host, nodeId?, sessionId?, patchSha256, files[{path, op, sha256Before,
	// sha256After}].
	TypePatch = "patch"
	// TypeGap: dropped, firstTs, lastTs, reason. Written by the ledger itself, before the
	// first record it manages to write after failing to write others: dropped records
	// were lost between firstTs and lastTs, the first of them for reason ([Gap]). A gap
	// record with dropped 0 and a reason starting "HEAD" says that the appender found
	// HEAD missing, unreadable or not signed by its key and rebuilt the end from the log:
	// an unknown number of records after the one before it may be missing.
	TypeGap = "gap"
)

var types = []string{TypeEvaluate, TypeRequest, TypeDecision, TypeExec, TypeEnd, TypePolicy, TypeNode, TypePatch}

// envelope are the members every record has; a record's Fields may not use them.
var envelope = []string{"v", "seq", "ts", "type", "agent", "prev", "hash"}

const (
	// Version is the record format version, the member v.
	Version = 1
	// DefaultRotateBytes is the default Options.RotateBytes (ledger.rotateBytes): 64 MiB.
	DefaultRotateBytes = 64 << 20
	// TimeFormat is the format of ts: RFC 3339, UTC, milliseconds.
	TimeFormat = "2006-01-02T15:04:05.000Z"
)

// ZeroHash is the prev of the first record.
var ZeroHash = strings.Repeat("0", 64)

// ErrInvalid is wrapped by the errors of Append for records that cannot be written at
// all (unknown type, Fields that do not encode to an object, reserved members). Such
// records are the caller's bug; they are not counted in a gap.
var ErrInvalid = errors.New("invalid ledger record")

// ErrBroken is wrapped by the errors of Append when the ledger on disk does not continue
// the chain its HEAD describes (truncated, edited or missing files).
var ErrBroken = errors.New("ledger broken")

// Record is one ledger record.
//
// On [Ledger.Append] the caller sets Type, Agent and Fields; the ledger sets V, Seq, TS,
// Prev and Hash. Fields is any value that encodes (with encoding/json) to a JSON object:
// a map[string]any or one of the structs of this package such as [Exec]; nil means no
// members. Records read back ([Tail]) have Fields as a map[string]any whose numbers are
// json.Number.
//
// Record encodes to (and decodes from) the flat JSON object of the log: the envelope
// members and the Fields' members side by side.
type Record struct {
	V      int       // format version, 1
	Seq    int64     // 1, 2, … across all files
	TS     time.Time // when it was appended, UTC, millisecond precision
	Type   string    // one of the Type constants
	Agent  string    // the agent the record concerns; "" for none
	Prev   string    // the previous record's Hash; ZeroHash for the first
	Hash   string    // sha256 of the record without hash, RFC 8785 canonical
	Fields any       // the type's members
}

// Options configure [Open]. The zero value is ready to use.
type Options struct {
	// RotateBytes is the size in bytes past which a new file is started: a record goes to
	// a new file when it would take a non-empty file beyond it. 0 means DefaultRotateBytes.
	RotateBytes int64
	// Forward, when set, sends every record written and the checkpoint of every HEAD
	// update to syslog or journald (see [Forward]). Forwarding never blocks or fails an
	// append.
	Forward *Forward
}

// Ledger appends to the ledger of one conch home. It is safe for concurrent use, and any
// number of Ledgers (in one process or several) may append to the same home.
type Ledger struct {
	dir         string
	rotateBytes int64

	key    ed25519.PrivateKey // signs HEAD (checkpoints); nil when unusable
	keyErr error              // why key is nil
	fwd    *forwarder         // nil without Options.Forward

	// appendFile writes a batch of lines; tests replace it to inject write failures.
	appendFile func(path string, size int64, buf []byte) error

	mu     sync.Mutex // guards lock's flock (one holder per description), closed, gap and signed
	lock   *os.File   // ledger/.lock
	closed bool
	gap    Gap    // records this Ledger failed to write since its last successful write
	signed string // the text of the last checkpoint of HEAD found signed by key
}

// Open opens the ledger in home/ledger, creating the directory (0700) and its lock file
// if needed, and loads the home's signing key ([KeyFile]), creating it when it is
// missing; a key it creates signs the current HEAD at once (trust on first use). A key
// that cannot be read or created does not stop appends: they write unsigned
// checkpoints, and [Ledger.KeyError] says why. It reads nothing else; damage is found by
// Append and [Verify].
func Open(home string, opts Options) (*Ledger, error) {
	dir := Dir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	// An unusable key must not stop the audit trail: records are then written with
	// unsigned checkpoints, which Verify reports.
	key, created, keyErr := ensureKey(home)
	lock, _, err := openOwn(filepath.Join(dir, ".lock"), os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	rb := opts.RotateBytes
	if rb <= 0 {
		rb = DefaultRotateBytes
	}
	l := &Ledger{dir: dir, rotateBytes: rb, lock: lock, key: key, keyErr: keyErr, appendFile: appendSync}
	if keyErr != nil {
		l.keyErr = fmt.Errorf("ledger signing key: %w", keyErr)
	}
	if created {
		if err := l.signHead(); err != nil {
			lock.Close()
			return nil, fmt.Errorf("open ledger: sign HEAD: %w", err)
		}
	}
	if opts.Forward != nil {
		fwd, err := newForwarder(*opts.Forward)
		if err != nil {
			lock.Close()
			return nil, fmt.Errorf("open ledger: %w", err)
		}
		l.fwd = fwd
	}
	return l, nil
}

// KeyError returns why l writes unsigned checkpoints (its key file is unusable), or nil.
func (l *Ledger) KeyError() error { return l.keyErr }

// signHead signs the current HEAD with l's new key: a HEAD written before the home had
// a key. A HEAD that is missing, unreadable or signed (by a key that is gone) is left
// for the next append, which records what it finds in a gap record before signing.
func (l *Ledger) signHead() error {
	if err := fsutil.Lock(l.lock, true); err != nil {
		return err
	}
	defer fsutil.Unlock(l.lock)
	if h, ok, _ := readHead(l.dir); !ok || h.Sig != "" {
		return nil
	}
	tip, err := findTip(l.dir, nil)
	if err != nil || tip.Seq == 0 || tip.distrust != "" {
		return err
	}
	_, err = writeHead(l.dir, tip, l.key)
	return err
}

// trusts reports whether HEAD h carries a checkpoint signed by l's key (always, when
// l has no key). Called with l.mu held.
func (l *Ledger) trusts(h head) bool {
	if l.key == nil {
		return true
	}
	ck := h.checkpoint()
	if ck.Sig != nil && ck.String() == l.signed {
		return true
	}
	if !ck.Valid(l.key.Public().(ed25519.PublicKey)) {
		return false
	}
	l.signed = ck.String()
	return true
}

// Gap describes records a [Ledger] failed to write; it is the Fields of a TypeGap record.
type Gap struct {
	Dropped int64  `json:"dropped"` // records lost
	FirstTS string `json:"firstTs"` // when the first was lost (TimeFormat)
	LastTS  string `json:"lastTs"`  // when the last was lost
	Reason  string `json:"reason"`  // why the first was lost
	// Unknown: how many records were lost is not known (Dropped is then 0). Set on the
	// gap record an append writes when HEAD did not vouch for the end of the log: the
	// records after the position rebuilt from the log may have been cut off.
	Unknown bool `json:"unknown,omitempty"`
}

// unknownSize reports whether a gap record's fields say its size is unknown: its
// unknown member, or, in a record written before that member existed, a count of 0
// with a reason about HEAD (the only gap record written with 0).
func unknownSize(m map[string]any, g Gap) bool {
	if u, _ := m["unknown"].(bool); u {
		return true
	}
	return g.Dropped == 0 && strings.HasPrefix(g.Reason, "HEAD")
}

// Dropped returns the records lost and not yet accounted for in a gap record: those
// noted in HEAD and those l could not even note there.
func (l *Ledger) Dropped() Gap {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gap
	if h, ok, _ := readHead(l.dir); ok && h.Lost != nil {
		g = mergeGaps(*h.Lost, g)
	}
	return g
}

// lose counts n records lost to err in l.gap, for when HEAD cannot hold them. Called
// with l.mu held.
func (l *Ledger) lose(n int, err error) {
	if n > 0 {
		l.gap = mergeGaps(l.gap, newGap(n, err))
	}
}

// maxReason bounds a gap's reason, so that a HEAD with a pending gap stays within one
// sector.
const maxReason = 120

// newGap describes n records lost now to err.
func newGap(n int, err error) Gap {
	now := time.Now().UTC().Format(TimeFormat)
	reason := "write failed"
	if err != nil {
		reason = err.Error()
	}
	if len(reason) > maxReason {
		reason = reason[:maxReason-3] + "..."
	}
	return Gap{Dropped: int64(n), FirstTS: now, LastTS: now, Reason: reason}
}

// mergeGaps returns the gap of a's records and then b's.
func mergeGaps(a, b Gap) Gap {
	switch {
	case a.Dropped == 0:
		return b
	case b.Dropped == 0:
		return a
	}
	a.Dropped += b.Dropped
	a.LastTS = b.LastTS
	return a
}

// Dir returns the ledger directory of a conch home.
func Dir(home string) string { return filepath.Join(home, "ledger") }

// Close makes a last attempt to record lost records (as a gap record, or noted in
// HEAD), releases the lock file and stops forwarding, waiting a little (at most about two
// seconds) for the queued messages to go out. Appends after Close fail. Lost records it
// could note nowhere (the ledger has no record yet, or HEAD cannot be written) leave no
// trace in the ledger; Close then returns an error saying how many.
func (l *Ledger) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	// One more try to record a gap (or at least note it in HEAD).
	l.appendLocked(nil)
	l.closed = true
	err := l.lock.Close()
	lost := l.gap.Dropped
	l.mu.Unlock()
	if l.fwd != nil {
		l.fwd.close()
	}
	if lost > 0 && err == nil {
		err = fmt.Errorf("close ledger: %d records were not written and could be noted neither in a gap record nor in HEAD", lost)
	}
	return err
}

// Append adds a record of type r.Type for r.Agent with r.Fields' members (see [Record])
// and returns it complete with Seq, TS, Prev and Hash. The record is on disk and fsynced,
// and HEAD names it, when Append returns. r.Fields may not contain the envelope members
// (v, seq, ts, type, agent, prev, hash). An error wrapping [ErrBroken] means the ledger on
// disk is damaged and nothing was appended. If only the final HEAD update fails, Append
// returns the complete record (Seq != 0) with the error: the record is in the log and must
// not be appended again.
func (l *Ledger) Append(r Record) (Record, error) {
	out, err := l.AppendBatch([]Record{r})
	if len(out) == 0 {
		return Record{}, err
	}
	return out[0], err
}

// AppendBatch appends rs in order, as Append would one by one, but under one lock, with
// one fsync per file written and one HEAD update: a group commit for a busy appender.
// The batch is all or nothing: a record that does not encode fails the whole batch
// before anything is written. The returned records are complete (Seq != 0) exactly when
// they are in the log; as with Append, an error with complete records means only HEAD
// was not updated.
func (l *Ledger) AppendBatch(rs []Record) ([]Record, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	ms := make([]map[string]any, len(rs))
	for i, r := range rs {
		if !slices.Contains(types, r.Type) {
			return nil, fmt.Errorf("append to ledger: %w: unknown record type %q", ErrInvalid, r.Type)
		}
		m, err := fieldsMap(r.Fields)
		if err != nil {
			return nil, fmt.Errorf("append to ledger: %w: %w", ErrInvalid, err)
		}
		ms[i] = m
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("append to ledger: ledger closed")
	}
	for i := range rs {
		ms[i]["type"] = rs[i].Type
		ms[i]["agent"] = rs[i].Agent
	}
	out, err := l.appendLocked(ms)
	for i := range out {
		r := rs[i]
		r.V, r.Seq, r.TS, r.Prev, r.Hash = out[i].V, out[i].Seq, out[i].TS, out[i].Prev, out[i].Hash
		out[i] = r
	}
	if err != nil {
		return out, fmt.Errorf("append to ledger: %w", err)
	}
	return out, nil
}

// appendLocked writes the records ms (type and agent set, the rest of the envelope not)
// under the append lock, preceded by a gap record when records were lost before (by
// this Ledger, or by any appender that noted them in HEAD), and returns the envelopes
// of those of ms that are in the log. Records not written are noted in HEAD's pending
// gap (rewritten in place, which needs no new disk space), or in l.gap when HEAD cannot
// be written. Called with l.mu held.
func (l *Ledger) appendLocked(ms []map[string]any) ([]Record, error) {
	if err := fsutil.Lock(l.lock, true); err != nil {
		l.lose(len(ms), err)
		return nil, err
	}
	defer fsutil.Unlock(l.lock)
	tip, err := findTip(l.dir, l.trusts)
	if err != nil {
		l.lose(len(ms), err)
		return nil, err
	}
	var headGap Gap
	if tip.Lost != nil {
		headGap = *tip.Lost
	}
	memGap := l.gap
	pending := mergeGaps(headGap, memGap)
	// Records the ledger writes itself go first: a gap record for an end of the log
	// that HEAD does not vouch for (see findTip), and one for the records lost.
	var prefix []map[string]any
	if tip.distrust != "" {
		unknown := newGap(0, errors.New(tip.distrust))
		unknown.Unknown = true
		g, _ := fieldsMap(unknown)
		g["type"], g["agent"] = TypeGap, ""
		prefix = append(prefix, g)
	}
	if pending.Dropped > 0 {
		g, _ := fieldsMap(pending)
		g["type"], g["agent"] = TypeGap, ""
		prefix = append(prefix, g)
	}
	ms = append(prefix, ms...)
	if len(ms) == 0 {
		return nil, nil
	}
	out, next, err := l.writeRecords(tip, ms)
	own := min(len(out), len(prefix)) // of the prefix, written
	out = out[own:]
	lost := len(ms) - len(prefix) - len(out)
	gapWritten := pending.Dropped > 0 && own == len(prefix)
	var newLoss Gap
	if lost > 0 {
		newLoss = newGap(lost, err)
	}
	if tip.distrust != "" && own == 0 {
		// Nothing written: HEAD must not be signed over the end of the log it does not
		// vouch for. The next append tries again.
		l.gap = mergeGaps(memGap, newLoss)
		return out, err
	}
	carry := newLoss // what HEAD is to hold
	if !gapWritten {
		carry = mergeGaps(pending, newLoss)
	}
	if carry.Dropped > 0 {
		next.Lost = &carry
	}
	l.gap = Gap{}
	if next.Seq == 0 {
		// No HEAD without a record: keep the count here.
		l.gap = carry
		return out, err
	}
	if next.Seq == tip.Seq && next.Lost == nil && tip.Lost == nil {
		return out, err // nothing changed
	}
	ck, herr := writeHead(l.dir, next, l.key)
	if herr != nil {
		// HEAD still says what it said; keep what it does not.
		l.gap = mergeGaps(memGap, newLoss)
		if gapWritten {
			l.gap = newLoss // HEAD's old note is dropped by recovery: the gap record follows it
		}
		if len(out) > 0 && err == nil {
			// The records are durable and the next Append repairs HEAD; do not append them again.
			err = fmt.Errorf("record %d written, HEAD not updated: %w", out[len(out)-1].Seq, herr)
		}
	} else {
		l.signed = ck.String()
		if l.fwd != nil && next.Seq > tip.Seq {
			l.fwd.send("checkpoint " + ck.String())
		}
	}
	return out, err
}

// writeRecords chains ms after tip and writes them. It returns the envelopes of those
// written and the head after them (tip when none was).
func (l *Ledger) writeRecords(tip head, ms []map[string]any) ([]Record, head, error) {
	next := tip
	next.Lost = nil
	ts := time.Now().UTC().Truncate(time.Millisecond)
	out := make([]Record, len(ms))
	lines := make([][]byte, len(ms))
	seq, prev := tip.Seq, tip.prevHash()
	for i, m := range ms {
		seq++
		m["v"] = json.Number("1")
		m["seq"] = json.Number(strconv.FormatInt(seq, 10))
		m["ts"] = ts.Format(TimeFormat)
		m["prev"] = prev
		hash, err := recordHash(m)
		if err != nil {
			return nil, next, err
		}
		m["hash"] = hash
		var line bytes.Buffer
		if err := writeCanonical(&line, m); err != nil {
			return nil, next, err
		}
		line.WriteByte('\n')
		lines[i] = line.Bytes()
		out[i] = Record{V: Version, Seq: seq, TS: ts, Type: m["type"].(string), Prev: prev, Hash: hash}
		prev = hash
	}
	end, n, err := l.write(tip, lines)
	out = out[:n]
	if n > 0 {
		next = end
		next.Seq, next.Hash = out[n-1].Seq, out[n-1].Hash
		if l.fwd != nil {
			for _, line := range lines[:n] {
				l.fwd.send(string(bytes.TrimSuffix(line, []byte("\n"))))
			}
		}
	}
	return out, next, err
}

// write appends lines after tip, each in tip's file or a new one when it would take a
// non-empty file past rotateBytes, and fsyncs every file it wrote. It returns the new end
// position and how many lines are durable; a failure loses only the lines of the file
// being written (truncated back when possible) and those after it.
func (l *Ledger) write(tip head, lines [][]byte) (head, int, error) {
	appendFile := l.appendFile
	if appendFile == nil {
		appendFile = appendSync
	}
	name, size := tip.File, tip.Size
	if name == "" {
		name = fileName(1)
	}
	done := 0
	end := head{File: tip.File, Size: tip.Size}
	for done < len(lines) {
		if size > 0 && size+int64(len(lines[done])) > l.rotateBytes {
			i, _ := fileIndex(name)
			name, size = fileName(i+1), 0
		}
		// The lines that fit in this file (at least one: an oversized record gets a file
		// of its own).
		var buf []byte
		k := done
		for k < len(lines) && (k == done || size+int64(len(buf)+len(lines[k])) <= l.rotateBytes) {
			buf = append(buf, lines[k]...)
			k++
		}
		if err := appendFile(filepath.Join(l.dir, name), size, buf); err != nil {
			return end, done, err
		}
		size += int64(len(buf))
		end = head{File: name, Size: size}
		done = k
	}
	return end, done, nil
}

// appendSync appends buf to the file at path, which is size bytes long, and makes it
// durable: fsyncs it, and its directory too when the file is new (size 0). On failure it
// truncates the file back to size when it can, leaving no torn line behind and no line
// that was reported lost.
func appendSync(path string, size int64, buf []byte) error {
	return appendWith(path, size, buf, durable)
}

// durable fsyncs f, and the directory of a new file.
func durable(f *os.File, isNew bool) error {
	if err := f.Sync(); err != nil {
		return err
	}
	if isNew {
		return fsutil.SyncDir(filepath.Dir(f.Name()))
	}
	return nil
}

// appendWith is appendSync with sync making the write durable; tests inject failures.
func appendWith(path string, size int64, buf []byte, sync func(f *os.File, isNew bool) error) error {
	f, _, err := openOwn(path, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf); err != nil {
		f.Truncate(size)
		f.Close()
		return err
	}
	if err := sync(f, size == 0); err != nil {
		// The lines may still be in the page cache, and would be found after HEAD
		// by the next append, though counted in a gap: drop them.
		f.Truncate(size)
		f.Close()
		return err
	}
	return f.Close()
}

// fieldsMap encodes v and decodes it as a JSON object.
func fieldsMap(v any) (map[string]any, error) {
	if v == nil {
		return map[string]any{}, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("fields: %w", err)
	}
	d, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("fields: %w", err)
	}
	m, ok := d.(map[string]any)
	if !ok {
		if d == nil {
			return map[string]any{}, nil
		}
		return nil, fmt.Errorf("fields: %T does not encode to a JSON object", v)
	}
	for _, k := range envelope {
		if _, ok := m[k]; ok {
			return nil, fmt.Errorf("fields: member %q is reserved", k)
		}
	}
	return m, nil
}

// recordHash returns the hash of the record m without its hash member.
func recordHash(m map[string]any) (string, error) {
	h, had := m["hash"]
	delete(m, "hash")
	var b bytes.Buffer
	err := writeCanonical(&b, m)
	if had {
		m["hash"] = h
	}
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// head is the content of ledger/HEAD: the last record and where the log ends.
type head struct {
	Seq  int64  `json:"seq"`  // the last record's seq; 0 when there is none
	Hash string `json:"hash"` // the last record's hash
	File string `json:"file"` // the file that holds it (and where the next one goes)
	Size int64  `json:"size"` // that file's size after it
	// The checkpoint of seq and hash: when it was signed (unix ms) and the signature
	// (base64url); empty in a HEAD written without a key (older versions).
	TS  int64  `json:"ts,omitempty"`
	Sig string `json:"sig,omitempty"`
	// Lost are records lost after seq and not yet in a gap record: the next append
	// writes the gap record first.
	Lost *Gap `json:"lost,omitempty"`

	// distrust, set by findTip, says why the position was rebuilt from the log rather
	// than taken from HEAD; the next append records it in a gap record.
	distrust string
}

// checkpoint returns the checkpoint HEAD carries; Sig is nil when HEAD is unsigned or the
// signature does not decode.
func (h head) checkpoint() Checkpoint {
	c := Checkpoint{Seq: h.Seq, Hash: h.Hash}
	if sig, err := base64.RawURLEncoding.DecodeString(h.Sig); err == nil && len(sig) == ed25519.SignatureSize {
		c.TS, c.Sig = time.UnixMilli(h.TS).UTC(), sig
	}
	return c
}

func (h head) prevHash() string {
	if h.Seq == 0 {
		return ZeroHash
	}
	return h.Hash
}

const headName = "HEAD"

// readHead reads HEAD. A missing HEAD gives ok false and no error.
func readHead(dir string) (h head, ok bool, err error) {
	data, err := readSmall(filepath.Join(dir, headName), oNoFollow, maxHead)
	if errors.Is(err, fs.ErrNotExist) {
		return head{}, false, nil
	}
	if err != nil {
		return head{}, false, fmt.Errorf("HEAD unreadable: %w", err)
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return head{}, false, fmt.Errorf("HEAD unreadable: %w", err)
	}
	if _, valid := fileIndex(h.File); !valid || h.Seq < 1 || h.Size < 1 || !isHash(h.Hash) {
		return head{}, false, fmt.Errorf("HEAD unreadable: invalid content %q", bytes.TrimSpace(data))
	}
	return h, true, nil
}

// maxHead bounds what readHead reads: a longer HEAD is unreadable.
const maxHead = 4096

// errNotRegular is the error of openFile for a path that is not a regular file.
var errNotRegular = errors.New("not a regular file")

// openFile opens the existing regular file at path with flag: never a FIFO (opened
// without blocking, then refused), and with oNoFollow in flag never through a symlink.
func openFile(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|oNonBlock, 0)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return nil, &fs.PathError{Op: "open", Path: path, Err: errNotRegular}
		}
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = &fs.PathError{Op: "open", Path: path, Err: errNotRegular}
		}
		return nil, err
	}
	return f, nil
}

// openOwn opens (creating it, 0600, when missing) one of the ledger's own files at path
// with flag, never through a symlink nor into a FIFO: anything but a regular file there
// (put by someone who can write the directory) is removed and the file made anew.
// created reports whether this call created it.
func openOwn(path string, flag int) (f *os.File, created bool, err error) {
	for try := 0; try < 3; try++ {
		f, err = os.OpenFile(path, flag|os.O_CREATE|os.O_EXCL|oNoFollow|oNonBlock, 0o600)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, false, err
		}
		f, err = openFile(path, flag|oNoFollow)
		switch {
		case err == nil:
			return f, false, nil
		case errors.Is(err, errNotRegular):
			if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return nil, false, err
			}
		case !errors.Is(err, fs.ErrNotExist): // (removed meanwhile: try again)
			return nil, false, err
		}
	}
	return nil, false, err
}

// readSmall reads the regular file at path, opened with flag (O_RDONLY and oNoFollow or
// not), failing when it holds more than limit bytes.
func readSmall(path string, flag, limit int) ([]byte, error) {
	f, err := openFile(path, os.O_RDONLY|flag)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err == nil && len(data) > limit {
		err = fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return data, err
}

// headSize is the size HEAD is padded to (a signed head takes about 270 bytes): one
// 512-byte sector.
const headSize = 512

// writeHead rewrites HEAD in place: one write of headSize bytes at offset 0
// (the JSON padded with spaces), within one sector, and no fsync (but for
// the HEAD that creates the file). HEAD is a
// hint written after the records are durable: a crash can only leave it
// behind the log, which Append repairs, or (should the write tear)
// unreadable, which Append rebuilds from the log. A temporary file renamed
// over HEAD would cost an inode and two fsyncs per append, which on a busy
// gateway was the ledger's largest cost.
//
// With a key, HEAD carries a checkpoint of its record signed now; writeHead returns it.
func writeHead(dir string, h head, key ed25519.PrivateKey) (Checkpoint, error) {
	var ck Checkpoint
	h.TS, h.Sig = 0, ""
	if key != nil {
		ck = signCheckpoint(key, h.Seq, h.Hash, time.Now())
		h.TS, h.Sig = ck.TS.UnixMilli(), base64.RawURLEncoding.EncodeToString(ck.Sig)
	}
	data, err := json.Marshal(h)
	if err != nil {
		return ck, err
	}
	buf := append(data, '\n')
	if len(buf) < headSize {
		buf = append(buf, bytes.Repeat([]byte{' '}, headSize-len(buf))...)
		buf[headSize-1] = '\n'
	}
	path := filepath.Join(dir, headName)
	// The first HEAD is made durable, so that a crash cannot leave an
	// empty one (which Verify would report); later ones need not be.
	f, created, err := openOwn(path, os.O_WRONLY)
	if err != nil {
		return ck, err
	}
	_, err = f.WriteAt(buf, 0)
	if err == nil {
		// Whatever was longer (an older HEAD, garbage) goes.
		err = f.Truncate(int64(len(buf)))
	}
	if err == nil && created {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && created {
		err = fsutil.SyncDir(dir)
	}
	return ck, err
}

// fileName returns the name of the i-th ledger file.
func fileName(i int) string { return fmt.Sprintf("ledger-%06d.jsonl", i) }

// fileIndex parses a ledger file name.
func fileIndex(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "ledger-")
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, ".jsonl")
	if !ok || len(digits) < 6 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(digits)
	return i, err == nil && i > 0 && fileName(i) == name
}

// listFiles returns the ledger file names in dir in order. A missing dir has none.
func listFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type file struct {
		name  string
		index int
	}
	var files []file
	for _, e := range ents {
		if i, ok := fileIndex(e.Name()); ok && e.Type().IsRegular() {
			files = append(files, file{e.Name(), i})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return a.index - b.index })
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	return names, nil
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// findTip returns the position of the chain's last record, under the append lock. The
// fast path trusts HEAD when it names the last file at its current size; otherwise the
// log is recovered (see the package comment).
//
// HEAD is what stops records from being cut off the end or rewritten: its checkpoint
// is signed. A HEAD that is missing, unreadable, or (trusted non-nil) not trusted is
// rebuilt from the log, and the tip's distrust says so, for the next append to record
// in a gap record: signing the log as it is found would launder whatever was done to it.
func findTip(dir string, trusted func(head) bool) (head, error) {
	files, err := listFiles(dir)
	if err != nil {
		return head{}, err
	}
	h, ok, herr := readHead(dir)
	var distrust string
	switch {
	case herr != nil:
		distrust = "HEAD unreadable"
	case !ok && len(files) > 0:
		distrust = "HEAD missing"
	case ok && trusted != nil && !trusted(h):
		distrust = fmt.Sprintf("HEAD (seq %d) not signed by the ledger key", h.Seq)
	}
	if distrust != "" {
		var tip head
		if len(files) > 0 {
			if tip, err = recoverTail(dir, files); err != nil {
				return head{}, err
			}
		}
		if tip.Seq == 0 && !ok && herr == nil {
			return tip, nil // no HEAD and no record yet: a new ledger
		}
		tip.Lost = h.Lost
		tip.distrust = fmt.Sprintf("%s: rebuilt from the log at seq %d, records after it may be missing", distrust, tip.Seq)
		return tip, nil
	}
	if len(files) == 0 {
		if ok {
			return head{}, fmt.Errorf("%w: HEAD is at seq %d but there are no ledger files", ErrBroken, h.Seq)
		}
		return head{}, nil
	}
	last := files[len(files)-1]
	if h.File == last {
		if st, err := os.Stat(filepath.Join(dir, last)); err == nil && st.Size() == h.Size {
			return h, nil
		}
	}
	return recoverFrom(dir, files, h)
}

// recoverFrom checks the records after HEAD's position and returns the tip after them,
// truncating an incomplete last line.
func recoverFrom(dir string, files []string, h head) (head, error) {
	i := slices.Index(files, h.File)
	if i < 0 {
		return head{}, fmt.Errorf("%w: HEAD names %s, which does not exist", ErrBroken, h.File)
	}
	cur := h
	for j := i; j < len(files); j++ {
		path := filepath.Join(dir, files[j])
		f, err := os.Open(path)
		if err != nil {
			return head{}, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return head{}, err
		}
		off := int64(0)
		if j == i {
			if st.Size() < h.Size {
				f.Close()
				return head{}, fmt.Errorf("%w: %s is shorter than HEAD says (records removed)", ErrBroken, files[j])
			}
			off = h.Size
			if _, err := f.Seek(off, io.SeekStart); err != nil {
				f.Close()
				return head{}, err
			}
		} else {
			cur.File, cur.Size = files[j], 0
		}
		br := bufio.NewReader(f)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 && err == io.EOF {
				f.Close()
				if j != len(files)-1 {
					return head{}, fmt.Errorf("%w: %s ends in an incomplete record", ErrBroken, files[j])
				}
				// A torn write after HEAD was never acknowledged: drop it.
				if err := os.Truncate(path, off); err != nil {
					return head{}, err
				}
				return cur, nil
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return head{}, err
			}
			m, err := parseRecord(line)
			if err == nil {
				err = checkLink(m, cur.Seq+1, cur.prevHash())
			}
			if err != nil {
				f.Close()
				return head{}, fmt.Errorf("%w: %s after HEAD: %v", ErrBroken, files[j], err)
			}
			off += int64(len(line))
			cur.Seq, cur.Hash, cur.Size = seqOf(m), m["hash"].(string), off
			if m["type"] == TypeGap {
				cur.Lost = nil // HEAD's pending gap was written after it
			}
		}
		f.Close()
	}
	return cur, nil
}

// recoverTail rebuilds the tip without HEAD: the last complete record of the log. An
// incomplete last line of the last file is truncated.
func recoverTail(dir string, files []string) (head, error) {
	lastPath := filepath.Join(dir, files[len(files)-1])
	data, err := os.ReadFile(lastPath)
	if err != nil {
		return head{}, err
	}
	if n := bytes.LastIndexByte(data, '\n') + 1; n < len(data) {
		if err := os.Truncate(lastPath, int64(n)); err != nil {
			return head{}, err
		}
		data = data[:n]
	}
	tip := head{File: files[len(files)-1], Size: int64(len(data))}
	for j := len(files) - 1; j >= 0; j-- {
		if j < len(files)-1 {
			if data, err = os.ReadFile(filepath.Join(dir, files[j])); err != nil {
				return head{}, err
			}
		}
		data = bytes.TrimSuffix(data, []byte("\n"))
		if len(data) == 0 {
			continue
		}
		line := data[bytes.LastIndexByte(data, '\n')+1:]
		m, err := parseRecord(line)
		if err != nil {
			return head{}, fmt.Errorf("%w: last record of %s: %v", ErrBroken, files[j], err)
		}
		tip.Seq, tip.Hash = seqOf(m), m["hash"].(string)
		return tip, nil
	}
	return tip, nil
}

// parseRecord parses one line and checks the record's version and its own hash.
func parseRecord(line []byte) (map[string]any, error) {
	v, err := decode(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		return nil, fmt.Errorf("unparsable record: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("unparsable record: not a JSON object")
	}
	if n, _ := m["v"].(json.Number); n != "1" {
		return nil, fmt.Errorf("unsupported record version %v", m["v"])
	}
	if seqOf(m) < 1 {
		return nil, errors.New("record without a valid seq")
	}
	stored, _ := m["hash"].(string)
	if !isHash(stored) {
		return nil, errors.New("record without a valid hash")
	}
	sum, err := recordHash(m)
	if err != nil {
		return nil, fmt.Errorf("unparsable record: %v", err)
	}
	if sum != stored {
		return nil, errors.New("hash mismatch (record altered)")
	}
	return m, nil
}

// checkLink checks that m is record number seq and follows a record with hash prev.
func checkLink(m map[string]any, seq int64, prev string) error {
	if got := seqOf(m); got != seq {
		return fmt.Errorf("expected seq %d, found seq %d (records missing, reordered or inserted)", seq, got)
	}
	if p, _ := m["prev"].(string); p != prev {
		return fmt.Errorf("prev does not match the hash of seq %d", seq-1)
	}
	return nil
}

// seqOf returns m's seq, or 0 if it has none.
func seqOf(m map[string]any) int64 {
	n, _ := m["seq"].(json.Number)
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0
	}
	return i
}

// MarshalJSON encodes r as the flat, canonical JSON object of the log.
func (r Record) MarshalJSON() ([]byte, error) {
	m, err := fieldsMap(r.Fields)
	if err != nil {
		return nil, err
	}
	m["v"] = json.Number(strconv.Itoa(r.V))
	m["seq"] = json.Number(strconv.FormatInt(r.Seq, 10))
	m["ts"] = r.TS.UTC().Format(TimeFormat)
	m["type"] = r.Type
	m["agent"] = r.Agent
	m["prev"] = r.Prev
	m["hash"] = r.Hash
	var b bytes.Buffer
	if err := writeCanonical(&b, m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// UnmarshalJSON decodes a flat record object; members other than the envelope's go to
// Fields as a map[string]any with json.Number numbers.
func (r *Record) UnmarshalJSON(data []byte) error {
	v, err := decode(data)
	if err != nil {
		return err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return errors.New("ledger record: not a JSON object")
	}
	*r = fromMap(m)
	return nil
}

// fromMap builds a Record from a decoded record object, taking the envelope out of m.
func fromMap(m map[string]any) Record {
	str := func(k string) string { s, _ := m[k].(string); return s }
	r := Record{Seq: seqOf(m), Type: str("type"), Agent: str("agent"), Prev: str("prev"), Hash: str("hash")}
	if n, ok := m["v"].(json.Number); ok {
		v, _ := n.Int64()
		r.V = int(v)
	}
	r.TS, _ = time.Parse(time.RFC3339Nano, str("ts"))
	for _, k := range envelope {
		delete(m, k)
	}
	r.Fields = m
	return r
}
