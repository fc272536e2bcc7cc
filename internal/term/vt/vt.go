// Package vt keeps the screen of a terminal session: a VT emulator fed
// with a PTY's output that can be asked for a text snapshot of what a user
// would see, and that produces the answers a real terminal gives to the
// program's queries (cursor position, device attributes).
//
// It wraps github.com/charmbracelet/x/vt behind a small API whose calls
// never hold up the program. That emulator is slow next to a PTY: every
// scrolled line copies the whole screen (about 15 µs at 120×30), so a
// flood of short lines is emulated at well under 1 MB/s. [Terminal.Write]
// therefore only queues the output, a goroutine feeds the queue to the
// emulator, and when the queue passes [MaxBacklog] bytes or
// [MaxBacklogLines] line ends its oldest half is skipped. Output that
// floods a terminal scrolls away anyway; the snapshot reports how many
// bytes were skipped, since state they held (a mode, a title) is lost.
package vt

import (
	"bytes"
	"io"
	"strings"
	"sync"

	cvt "github.com/charmbracelet/x/vt"
)

// Default size of a session terminal.
const (
	DefaultCols = 120
	DefaultRows = 30
)

// Bounds of the output waiting for the emulator. Passing either skips the
// oldest waiting output down to half of both. Together they bound the
// time to catch up (what a Snapshot may wait) to a fraction of a second.
const (
	MaxBacklog      = 1 << 20 // bytes
	MaxBacklogLines = 4096    // LF bytes
)

// maxPendingReplies bounds the replies kept for one delivery.
const maxPendingReplies = 64 << 10

// can ends any escape sequence in the parser (ECMA-48 CAN): fed before
// the output that follows a skip, which may start inside a sequence.
const can = 0x18

// Snapshot is what the screen shows at one moment.
type Snapshot struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
	// Lines holds every row of the active screen, top to bottom
	// (len(Lines) == Rows), with trailing spaces trimmed. The right half
	// of a wide character adds nothing.
	Lines []string `json:"lines"`
	// CursorRow and CursorCol are 1-based, like the terminal's own cursor
	// position report (ESC[<row>;<col>R).
	CursorRow     int  `json:"cursorRow"`
	CursorCol     int  `json:"cursorCol"`
	CursorVisible bool `json:"cursorVisible"`
	// AltScreen is set while the program uses the alternate screen
	// (full-screen programs such as vim, less).
	AltScreen bool `json:"altScreen"`
	// Title is the window title last set with OSC 0 or OSC 2.
	Title string `json:"title,omitempty"`
	// SkippedBytes counts output that was never emulated (see the package
	// doc); when it is not 0 the screen is approximate.
	SkippedBytes int64 `json:"skippedBytes,omitempty"`
}

// Terminal is an emulated terminal. Its methods are safe for concurrent
// use. Create it with New and release it with Close.
type Terminal struct {
	bmu     sync.Mutex // guards the fields up to progress
	backlog []byte     // output not yet taken by feed
	lines   int        // LF bytes in backlog
	written int64      // bytes passed to Write
	done    int64      // bytes of written emulated or skipped
	skipped int64
	resync  bool // a skip happened since feed last took the backlog
	closed  bool
	// progress is signalled (on bmu) when the backlog grows, done grows
	// or the terminal closes.
	progress *sync.Cond

	mu    sync.Mutex // guards em and title; held by feed while it emulates
	em    *emulator
	title string

	rmu     sync.Mutex // guards pending
	pending []byte     // replies drained from the emulator, not yet sent

	replies chan []byte
	fed     chan struct{} // closed when feed returns
}

// emulator is one instance of the library's emulator with the goroutine
// that drains its replies.
type emulator struct {
	*cvt.Emulator
	// pipe is the library's reply pipe; an empty write on it returns
	// only once drain has stored everything written to it before.
	pipe    io.WriteCloser
	drained chan struct{} // closed when drain returns
}

// New returns a Terminal of cols × rows cells; sizes below 1 mean the
// defaults (120 × 30).
func New(cols, rows int) *Terminal {
	if cols < 1 {
		cols = DefaultCols
	}
	if rows < 1 {
		rows = DefaultRows
	}
	t := &Terminal{replies: make(chan []byte, 16), fed: make(chan struct{})}
	t.progress = sync.NewCond(&t.bmu)
	t.em = t.newEmulator(cols, rows)
	go t.feed()
	return t
}

func (t *Terminal) newEmulator(cols, rows int) *emulator {
	e := &emulator{Emulator: cvt.NewEmulator(cols, rows), drained: make(chan struct{})}
	// Only the visible screen is kept: the library's default of 10000
	// scrollback lines costs megabytes (1 is its minimum).
	e.SetScrollbackSize(1)
	e.SetCallbacks(cvt.Callbacks{Title: func(s string) { t.title = s }})
	e.pipe = e.InputPipe().(io.WriteCloser)
	go t.drain(e)
	return e
}

// close ends e's drain goroutine.
func (e *emulator) close() {
	e.pipe.Close()
	<-e.drained
}

// Write queues program output for the terminal. It never blocks on the
// emulator and never fails.
func (t *Terminal) Write(p []byte) (int, error) {
	t.bmu.Lock()
	defer t.bmu.Unlock()
	if t.closed || len(p) == 0 {
		return len(p), nil
	}
	t.written += int64(len(p))
	t.backlog = append(t.backlog, p...)
	t.lines += bytes.Count(p, []byte{'\n'})
	if len(t.backlog) > MaxBacklog || t.lines > MaxBacklogLines {
		cut := skipTo(t.backlog)
		t.lines -= bytes.Count(t.backlog[:cut], []byte{'\n'})
		n := copy(t.backlog, t.backlog[cut:])
		t.backlog = t.backlog[:n]
		t.skipped += int64(cut)
		t.done += int64(cut)
		t.resync = true
	}
	t.progress.Broadcast()
	return len(p), nil
}

// skipTo returns where to resume in a backlog that is over its bounds:
// after at most half of each bound is left, at a line end when possible
// (line-oriented output then resumes cleanly).
func skipTo(b []byte) int {
	cut := max(len(b)-MaxBacklog/2, 0)
	if i := bytes.IndexByte(b[cut:min(cut+4096, len(b))], '\n'); i >= 0 {
		cut += i + 1
	}
	end := len(b)
	for n := 0; ; n++ {
		j := bytes.LastIndexByte(b[cut:end], '\n')
		if j < 0 {
			return cut
		}
		if n == MaxBacklogLines/2 {
			return cut + j + 1
		}
		end = cut + j
	}
}

// Flush waits until all output written before the call has been emulated
// (or skipped).
func (t *Terminal) Flush() {
	t.bmu.Lock()
	defer t.bmu.Unlock()
	target := t.written
	for t.done < target && !t.closed {
		t.progress.Wait()
	}
}

// Replies delivers the bytes the terminal sends back to the program:
// answers to cursor position (ESC[6n, ESC[?6n), device attribute (ESC[c)
// and similar queries, in order. The owner of the PTY writes them to the
// master. Replies are dropped while nobody receives (16 deliveries
// waiting). The channel is closed by Close.
func (t *Terminal) Replies() <-chan []byte { return t.replies }

// Resize changes the size of the screen once the output written so far
// has been emulated; sizes below 1 are ignored. (A report the program
// asked for on resize goes out with the replies to its next output.)
func (t *Terminal) Resize(cols, rows int) {
	if cols < 1 || rows < 1 {
		return
	}
	t.Flush()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.em.Resize(cols, rows)
	t.em.pipe.Write(nil)
}

// Snapshot returns the screen after all output written before the call.
func (t *Terminal) Snapshot() Snapshot {
	t.Flush()
	t.bmu.Lock()
	skipped := t.skipped
	t.bmu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	em := t.em
	cols, rows := em.Width(), em.Height()
	pos := em.CursorPosition()
	s := Snapshot{
		Cols: cols, Rows: rows, Lines: make([]string, rows),
		CursorRow: pos.Y + 1, CursorCol: pos.X + 1,
		CursorVisible: !em.CursorHidden(), AltScreen: em.IsAltScreen(),
		Title: t.title, SkippedBytes: skipped,
	}
	var b strings.Builder
	for y := range rows {
		b.Reset()
		for x := range cols {
			c := em.CellAt(x, y)
			switch {
			case c == nil:
				b.WriteByte(' ')
			case c.Content == "" && c.Width == 0:
				// The right half of a wide character.
			case c.Content == "":
				b.WriteByte(' ')
			default:
				b.WriteString(c.Content)
			}
		}
		s.Lines[y] = strings.TrimRight(b.String(), " ")
	}
	return s
}

// Close stops the terminal: queued output is dropped, later Writes are
// ignored, the Replies channel is closed. Snapshot still works.
func (t *Terminal) Close() error {
	t.bmu.Lock()
	t.closed = true
	t.progress.Broadcast()
	t.bmu.Unlock()
	<-t.fed
	return nil
}

// Replay emulates output, the end of a terminal's output, on a new
// terminal of cols × rows and returns the screen. Like Write it skips
// output beyond the backlog bounds; unlike a live Terminal the result
// does not depend on timing.
func Replay(cols, rows int, output []byte) Snapshot {
	t := New(cols, rows)
	defer t.Close()
	t.Write(output) // one Write: the skip is decided once, up front
	return t.Snapshot()
}

// feed moves queued output into the emulator. It owns the emulator's
// writes, and on exit closes the emulator and the Replies channel.
func (t *Terminal) feed() {
	defer close(t.fed)
	defer close(t.replies)
	defer func() { t.em.close() }()
	var chunk []byte
	for {
		t.bmu.Lock()
		for len(t.backlog) == 0 && !t.closed {
			t.progress.Wait()
		}
		if t.closed {
			t.bmu.Unlock()
			return
		}
		// Swap buffers: Write appends to the old chunk's array next.
		chunk, t.backlog = t.backlog, chunk[:0]
		t.lines = 0
		resync := t.resync
		t.resync = false
		t.bmu.Unlock()

		ok := t.emulate(chunk, resync)
		t.sendReplies()

		t.bmu.Lock()
		t.done += int64(len(chunk))
		if !ok {
			t.skipped += int64(len(chunk))
		}
		t.progress.Broadcast()
		t.bmu.Unlock()
		if cap(chunk) > 256<<10 {
			chunk = nil // a burst's buffer is not kept for a quiet session
		}
	}
}

// emulate feeds one chunk to the emulator. A panic in the library (none
// is known) must not take the PTY's owner down: the emulator is replaced
// by a blank one and the chunk counts as skipped.
func (t *Terminal) emulate(chunk []byte, resync bool) (ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer func() {
		if recover() != nil {
			cols, rows := t.em.Width(), t.em.Height()
			t.em.close()
			t.em = t.newEmulator(cols, rows)
			ok = false
		}
	}()
	if resync {
		t.em.Write([]byte{can})
	}
	t.em.Write(chunk)
	t.em.pipe.Write(nil)
	return true
}

// sendReplies delivers the drained replies without waiting for a reader;
// only feed calls it.
func (t *Terminal) sendReplies() {
	t.rmu.Lock()
	r := t.pending
	t.pending = nil
	t.rmu.Unlock()
	if len(r) == 0 {
		return
	}
	select {
	case t.replies <- r:
	default:
	}
}

// drain reads what e writes back to the program; the library blocks in
// Write until it is read.
func (t *Terminal) drain(e *emulator) {
	defer close(e.drained)
	buf := make([]byte, 4096)
	for {
		n, err := e.Read(buf)
		if n > 0 {
			t.rmu.Lock()
			if len(t.pending)+n <= maxPendingReplies {
				t.pending = append(t.pending, buf[:n]...)
			}
			t.rmu.Unlock()
		}
		if err != nil {
			return
		}
	}
}
