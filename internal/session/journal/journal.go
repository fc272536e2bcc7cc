// Package journal is a session's append-only on-disk output journal.
//
// One [Writer] (the session supervisor) appends every output chunk of a
// command and an echo of every agent input; any number of readers ([Read],
// [ReadAll], [ReadTail], [Stat]), in the same process or another one, read it
// concurrently by byte cursor without consuming anything.
//
// # Cursors
//
// A cursor is a count of output bytes: the cursor of a byte is the number of
// output bytes (stdout and stderr together, dropped bytes included) the
// session produced before it. Cursors only grow and the same cursor always
// denotes the same byte. Input records do not move the cursor.
//
// # On-disk format
//
// A journal is a directory of segment files named NNNNNN.seg (a decimal
// sequence number, zero-padded to at least six digits, starting at 000001).
// Other names in the directory are ignored. A segment is a sequence of
// records and a record never spans segments:
//
//	offset size field
//	0      1    type   u8
//	1      1    flags  u8 (0; readers ignore it)
//	2      4    len    u32 LE, payload length, at most 64 KiB
//	6      8    cursor u64 LE
//	14     8    ts     i64 LE, unix nanoseconds
//	22     len  payload
//	22+len 4    crc    u32 LE, CRC-32C (Castagnoli) of bytes [0, 22+len)
//
// Record types:
//
//	1 stdout   output; payload = bytes; cursor = position of payload[0]
//	2 stderr   output; as stdout
//	3 input    bytes the agent wrote; cursor = the output end at that time;
//	           does not advance the cursor
//	4 segment  first record of every segment; cursor = output end when the
//	           segment was started; payload = headLimit u64, droppedBytes u64,
//	           droppedLines u64 (LE, 24 bytes; longer payloads are allowed
//	           and the extra bytes ignored)
//
//	5 end      the session's end state, written once after the last
//	           output; cursor = output end; payload = opaque to the
//	           journal (the supervisor's exit record); does not advance
//	           the cursor
//
// Records of unknown type with a valid CRC are skipped. Within a segment each
// record's cursor equals the end of the record before it; a record that breaks
// this rule is invalid.
//
// # Cap
//
// The journal keeps at most [Options.MaxBytes] of output: the first
// headLimit bytes (the head, [Options.HeadBytes]) are always kept, and when
// keeping the next segment would pass the cap, the oldest segments after the
// head are deleted whole. The head segments end exactly at headLimit (an
// output record that would cross it is split), so the dropped range is one
// contiguous range [HeadEnd, TailStart). The totals of dropped bytes and
// dropped lines (LF bytes) are carried in the segment record that starts
// every segment, so the last segment's first record always describes the
// current gap: drops happen only when a segment is started, after its first
// record is written.
//
// # Concurrency and crash safety
//
// At most one Writer may have a journal open; on Unix [Create] takes an
// exclusive flock(2) on the directory and fails with [ErrLocked] if another
// writer holds it. A Writer's methods are safe for concurrent use.
//
// Readers take no locks and never write. They rely on the writer appending
// records in order and starting a new segment only after the previous one is
// complete: an incomplete or CRC-invalid record with no valid record after
// it in the last segment is taken as the end of the journal (the writer may
// be in the middle of writing it). A damaged record anywhere else (a flipped
// byte, a zeroed block, a segment cut short) does not end the read: the
// reader resynchronises on the next valid record, which it finds by
// scanning forward byte by byte for a header of a known type with zero
// flags, a length in range and a cursor the skipped bytes can account for,
// whose CRC-32C matches. The output bytes the damaged records held are
// missing from what a read delivers: the chunks jump over them, as over the
// dropped range, and a caller tells the two apart with [Info] (the dropped
// range is [HeadEnd, TailStart)). A segment whose first (segment) record is
// damaged starts at its first readable record. A segment deleted by the cap
// while a reader looks for it is skipped. An empty last segment (one the
// writer has just created) is ignored.
//
// The writer fsyncs at most every [Options.SyncInterval] from Append, and
// always in [Writer.Sync] and [Writer.Close]. On [Create] over an existing
// journal (a restarted writer) every segment is checked, the journal is
// truncated at the first invalid or torn record, and the cursor resumes at
// the end of the last valid record.
package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Stream identifies where a chunk came from.
type Stream uint8

// Streams. Stdout and Stderr are output; Input is the agent input echo,
// delivered only by [ReadAll].
const (
	Stdout Stream = 1
	Stderr Stream = 2
	Input  Stream = 3
)

// String returns "stdout", "stderr", "input", or "stream(N)".
func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case Input:
		return "input"
	}
	return "stream(" + strconv.Itoa(int(s)) + ")"
}

// Defaults for the zero fields of [Options].
const (
	DefaultMaxBytes     = 64 << 20
	DefaultHeadBytes    = 1 << 20
	DefaultSegmentBytes = 1 << 20
	DefaultSyncInterval = time.Second
)

// MaxRecordPayload is the largest payload of one record; [Writer.Append]
// splits larger writes.
const MaxRecordPayload = 64 << 10

// Options configure a [Writer]. The zero value uses the defaults.
type Options struct {
	// MaxBytes caps the output kept on disk, in bytes (head plus tail).
	// Zero or negative means DefaultMaxBytes (64 MiB); it is raised to at
	// least 16 KiB.
	MaxBytes int64

	// HeadBytes is how many bytes at the start of the output are always
	// kept. Zero means DefaultHeadBytes (1 MiB); negative means no head.
	// It is clamped to MaxBytes/4. When a writer resumes an existing
	// journal, the head recorded in the journal wins.
	HeadBytes int64

	// SegmentBytes is the size at which a segment file is closed and a new
	// one started, in bytes, record overhead included; segments never grow
	// past it. Zero or negative means DefaultSegmentBytes (1 MiB). It is
	// clamped to [4 KiB, MaxBytes/4].
	SegmentBytes int64

	// SyncInterval is the most often Append fsyncs the journal. Zero means
	// DefaultSyncInterval (1 s); negative means Append never fsyncs and
	// only Sync and Close do.
	SyncInterval time.Duration

	// New says dir holds no journal (a new session's directory), so
	// Create neither looks for one nor locks dir: the caller guarantees
	// the single writer. (A reused directory may still be locked by a
	// writer that has not closed yet.)
	New bool
}

const minSegmentBytes = 4 << 10

// normalize returns o with defaults and clamps applied.
func (o Options) normalize() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	o.MaxBytes = max(o.MaxBytes, 4*minSegmentBytes)
	switch {
	case o.HeadBytes == 0:
		o.HeadBytes = DefaultHeadBytes
	case o.HeadBytes < 0:
		o.HeadBytes = 0
	}
	o.HeadBytes = min(o.HeadBytes, o.MaxBytes/4)
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	o.SegmentBytes = max(min(o.SegmentBytes, o.MaxBytes/4), minSegmentBytes)
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	return o
}

// Chunk is a piece of one record delivered to a read callback.
type Chunk struct {
	// Cursor is the position of Data[0]. For an Input chunk it is the
	// output end when the input was written.
	Cursor int64
	Stream Stream
	// Data is only valid during the callback; copy it to keep it.
	Data []byte
	// TimeNs is when the record was appended, in unix nanoseconds.
	TimeNs int64
}

// End returns the cursor just after the chunk. For an Input chunk it equals
// Cursor.
func (c Chunk) End() int64 {
	if c.Stream == Input {
		return c.Cursor
	}
	return c.Cursor + int64(len(c.Data))
}

// Info describes a journal. All positions are cursors; sizes are in bytes.
type Info struct {
	End          int64 // cursor after the last valid output byte
	HeadEnd      int64 // end of the kept head; equals TailStart when nothing was dropped
	TailStart    int64 // first kept byte after the dropped range
	DroppedBytes int64 // TailStart - HeadEnd
	DroppedLines int64 // LF bytes in the dropped range
	Segments     int   // segment files on disk
	Bytes        int64 // size of the segment files on disk
}

// Errors callers may branch on with errors.Is.
var (
	// ErrCorrupt marks an invalid record that is not at the end of the
	// journal. Readers no longer return it (they resynchronise past
	// damage); it is kept for callers that test for it.
	ErrCorrupt = errors.New("journal corrupt")
	// ErrLocked is returned by Create when another writer has the journal
	// open.
	ErrLocked = errors.New("journal locked by another writer")
	// ErrClosed is returned by a Writer's methods after Close.
	ErrClosed = errors.New("journal closed")
)

// Record encoding.
const (
	recStdout  = 1
	recStderr  = 2
	recInput   = 3
	recSegment = 4
	recEnd     = 5

	headerLen      = 22
	crcLen         = 4
	overhead       = headerLen + crcLen
	segPayloadLen  = 24
	segRecordLen   = overhead + segPayloadLen
	maxRecordBytes = overhead + MaxRecordPayload
)

// castagnoli is the CRC table, made on first use: conch-shim's
// sandbox-init links this package and never checksums anything.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// record is a decoded record; payload aliases the buffer it was decoded from.
type record struct {
	typ     uint8
	cursor  int64
	ts      int64
	payload []byte
}

// end returns the cursor after the record.
func (r *record) end() int64 {
	if r.typ == recStdout || r.typ == recStderr {
		return r.cursor + int64(len(r.payload))
	}
	return r.cursor
}

// segMeta is the payload of a segment record.
type segMeta struct {
	start        int64 // cursor of the segment record
	headLimit    int64
	droppedBytes int64
	droppedLines int64
}

func (m segMeta) info(end int64) Info {
	in := Info{End: end, HeadEnd: min(m.headLimit, end)}
	if m.droppedBytes > 0 {
		in.HeadEnd = m.headLimit
		in.DroppedBytes = m.droppedBytes
		in.DroppedLines = m.droppedLines
	}
	in.TailStart = in.HeadEnd + in.DroppedBytes
	return in
}

// appendRecord appends the encoded record to b.
func appendRecord(b []byte, typ uint8, cursor, ts int64, payload []byte) []byte {
	start := len(b)
	b = append(b, typ, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint64(b, uint64(cursor))
	b = binary.LittleEndian.AppendUint64(b, uint64(ts))
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli()))
}

func encodeSegMeta(m segMeta) []byte {
	b := make([]byte, 0, segPayloadLen)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.headLimit))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.droppedBytes))
	return binary.LittleEndian.AppendUint64(b, uint64(m.droppedLines))
}

// decodeSegMeta decodes a segment record; ok is false if r is not one.
func decodeSegMeta(r *record) (m segMeta, ok bool) {
	if r.typ != recSegment || len(r.payload) < segPayloadLen {
		return m, false
	}
	m = segMeta{
		start:        r.cursor,
		headLimit:    int64(binary.LittleEndian.Uint64(r.payload[0:])),
		droppedBytes: int64(binary.LittleEndian.Uint64(r.payload[8:])),
		droppedLines: int64(binary.LittleEndian.Uint64(r.payload[16:])),
	}
	if m.start < 0 || m.headLimit < 0 || m.droppedBytes < 0 || m.droppedLines < 0 {
		return m, false
	}
	return m, true
}

// recordLen returns the full length of the record whose header starts b
// (len(b) >= headerLen), or -1 if the length field is out of range.
func recordLen(b []byte) int {
	n := binary.LittleEndian.Uint32(b[2:])
	if n > MaxRecordPayload {
		return -1
	}
	return overhead + int(n)
}

// decodeRecord decodes the record at the start of b, which holds exactly
// recordLen bytes. ok is false if the CRC does not match.
func decodeRecord(b []byte) (r record, ok bool) {
	n := len(b) - crcLen
	if crc32.Checksum(b[:n], castagnoli()) != binary.LittleEndian.Uint32(b[n:]) {
		return r, false
	}
	r = record{
		typ:     b[0],
		cursor:  int64(binary.LittleEndian.Uint64(b[6:])),
		ts:      int64(binary.LittleEndian.Uint64(b[14:])),
		payload: b[headerLen:n],
	}
	return r, r.cursor >= 0
}

// segName returns the file name of segment seq.
func segName(seq int) string { return fmt.Sprintf("%06d.seg", seq) }

// parseSegName returns the sequence number of a segment file name.
func parseSegName(name string) (int, bool) {
	digits, ok := strings.CutSuffix(name, ".seg")
	if !ok || len(digits) < 6 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	seq, err := strconv.Atoi(digits)
	return seq, err == nil && seq > 0
}
