package vt

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// write feeds s and waits until it is emulated.
func write(t *testing.T, term *Terminal, s string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		term.Write([]byte(s))
		term.Flush()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Write(%q) did not finish", s)
	}
}

// reply returns the next delivery of replies.
func reply(t *testing.T, term *Terminal) string {
	t.Helper()
	select {
	case r := <-term.Replies():
		return string(r)
	case <-time.After(5 * time.Second):
		t.Fatal("no reply")
		return ""
	}
}

func noReply(t *testing.T, term *Terminal) {
	t.Helper()
	select {
	case r := <-term.Replies():
		t.Errorf("unexpected reply %q", r)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestVTCursorPositionReply(t *testing.T) {
	term := New(80, 24)
	defer term.Close()
	write(t, term, "hello\r\nab\x1b[6n")
	if got, want := reply(t, term), "\x1b[2;3R"; got != want {
		t.Errorf("reply to ESC[6n = %q, want %q", got, want)
	}
	write(t, term, "plain text")
	noReply(t, term)
	write(t, term, "\x1b[10;20H\x1b[?6n")
	if got := reply(t, term); got != "\x1b[?10;20;1R" && got != "\x1b[?10;20R" {
		t.Errorf("reply to ESC[?6n = %q, want ESC[?10;20R", got)
	}
	write(t, term, "\x1b[c")
	if got := reply(t, term); !strings.HasPrefix(got, "\x1b[?") || !strings.HasSuffix(got, "c") {
		t.Errorf("reply to ESC[c = %q, want ESC[?…c", got)
	}
	s := term.Snapshot()
	if s.CursorRow != 10 || s.CursorCol != 20 {
		t.Errorf("cursor = %d,%d, want 10,20", s.CursorRow, s.CursorCol)
	}
}

// A query split across writes is still answered, once.
func TestVTQuerySplitAcrossWrites(t *testing.T) {
	term := New(80, 24)
	defer term.Close()
	write(t, term, "abc\x1b[")
	write(t, term, "6n")
	if got := reply(t, term); got != "\x1b[1;4R" {
		t.Errorf("reply = %q, want ESC[1;4R", got)
	}
}

// A program that floods queries while nobody collects the replies must
// not block the writer.
func TestVTRepliesNeverBlock(t *testing.T) {
	term := New(80, 24)
	defer term.Close()
	for range 100 {
		write(t, term, strings.Repeat("\x1b[6n", 1000))
	}
	n := 0
	for len(term.Replies()) > 0 {
		n++
		<-term.Replies()
	}
	if n == 0 || n > cap(term.Replies()) {
		t.Errorf("%d deliveries waiting, want 1..%d", n, cap(term.Replies()))
	}
}

func TestVTSnapshotText(t *testing.T) {
	term := New(20, 5)
	defer term.Close()
	write(t, term, "line one   \r\nprogress 10%\rprogress 100%\x1b[K\r\n界x")
	s := term.Snapshot()
	want := []string{"line one", "progress 100%", "界x", "", ""}
	if fmt.Sprint(s.Lines) != fmt.Sprint(want) {
		t.Errorf("lines = %q, want %q", s.Lines, want)
	}
	if s.Cols != 20 || s.Rows != 5 || s.CursorRow != 3 || s.CursorCol != 4 || !s.CursorVisible || s.AltScreen || s.SkippedBytes != 0 {
		t.Errorf("snapshot = %+v", s)
	}
	write(t, term, "\x1b[?25l")
	if term.Snapshot().CursorVisible {
		t.Error("cursor visible after ESC[?25l")
	}
}

// Snapshot covers everything written before it, without an explicit
// Flush.
func TestVTSnapshotSeesAllWrites(t *testing.T) {
	term := New(40, 3)
	defer term.Close()
	for i := range 2000 {
		fmt.Fprintf(term, "line %d\r\n", i)
	}
	s := term.Snapshot()
	if s.Lines[0] != "line 1998" || s.Lines[1] != "line 1999" || s.Lines[2] != "" {
		t.Errorf("lines = %q", s.Lines)
	}
}

func TestVTAltScreen(t *testing.T) {
	term := New(20, 5)
	defer term.Close()
	write(t, term, "$ shell")
	write(t, term, "\x1b[?1049h\x1b[H\x1b[2Jfull screen")
	s := term.Snapshot()
	if !s.AltScreen || s.Lines[0] != "full screen" {
		t.Errorf("in alt screen: %+v", s)
	}
	write(t, term, "\x1b[?1049l")
	s = term.Snapshot()
	if s.AltScreen || s.Lines[0] != "$ shell" || s.CursorCol != 8 {
		t.Errorf("after leaving alt screen: %+v", s)
	}
}

func TestVTTitle(t *testing.T) {
	term := New(20, 5)
	defer term.Close()
	write(t, term, "\x1b]0;first\x07")
	if got := term.Snapshot().Title; got != "first" {
		t.Errorf("title = %q, want first", got)
	}
	write(t, term, "\x1b]2;second\x1b\\")
	if got := term.Snapshot().Title; got != "second" {
		t.Errorf("title = %q, want second", got)
	}
}

func TestVTResize(t *testing.T) {
	term := New(20, 5)
	defer term.Close()
	write(t, term, "abcdefghij\r\n\r\n\r\n\r\nlast")
	term.Resize(8, 3)
	s := term.Snapshot()
	if s.Cols != 8 || s.Rows != 3 || len(s.Lines) != 3 {
		t.Fatalf("after resize: %+v", s)
	}
	for _, l := range s.Lines {
		if len(l) > 8 {
			t.Errorf("line %q wider than 8 columns", l)
		}
	}
	if s.CursorRow < 1 || s.CursorRow > 3 || s.CursorCol < 1 || s.CursorCol > 8 {
		t.Errorf("cursor %d,%d outside 8x3", s.CursorRow, s.CursorCol)
	}
	term.Resize(0, 10) // ignored
	if s := term.Snapshot(); s.Cols != 8 || s.Rows != 3 {
		t.Errorf("Resize(0, 10) changed the size to %dx%d", s.Cols, s.Rows)
	}
	write(t, term, "\x1b[H\x1b[2Jxy\x1b[6n")
	if got := reply(t, term); got != "\x1b[1;3R" {
		t.Errorf("reply after resize = %q", got)
	}
	term.Resize(30, 6)
	write(t, term, "\x1b[30;99H\x1b[6n")
	if got := reply(t, term); got != "\x1b[6;30R" {
		t.Errorf("reply at the corner of 30x6 = %q", got)
	}
}

// A flood of output, in bytes or in lines, written faster than it is
// emulated skips old output but keeps the newest screen exact, and a
// snapshot does not wait long.
func TestVTBacklogSkips(t *testing.T) {
	for _, tc := range []struct {
		name string
		line string
	}{
		{"long lines", strings.Repeat("x", 100) + "\r\n"},
		{"short lines", "y\r\n"},
		{"empty lines", "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			term := New(40, 3)
			defer term.Close()
			var n int64
			for n < 4*MaxBacklog {
				term.Write([]byte(strings.Repeat(tc.line, 500)))
				n += int64(500 * len(tc.line))
			}
			term.Write([]byte("\x1b[31mlast line\x1b[0m\r\n"))
			start := time.Now()
			s := term.Snapshot()
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("snapshot took %v", d)
			}
			if s.Lines[1] != "last line" || s.CursorRow != 3 {
				t.Errorf("lines = %q, cursor row %d", s.Lines, s.CursorRow)
			}
			if s.SkippedBytes <= 0 || s.SkippedBytes > n {
				t.Errorf("SkippedBytes = %d, want 1..%d", s.SkippedBytes, n)
			}
		})
	}
}

func TestVTSkipTo(t *testing.T) {
	lines := []byte(strings.Repeat("abc\n", MaxBacklogLines+10))
	cut := skipTo(lines)
	if got := bytes.Count(lines[cut:], []byte("\n")); got != MaxBacklogLines/2 || lines[cut-1] != '\n' {
		t.Errorf("kept %d line ends after cut %d, want %d", got, cut, MaxBacklogLines/2)
	}
	long := []byte(strings.Repeat("x", MaxBacklog) + "\n" + strings.Repeat("y", 100))
	cut = skipTo(long)
	if len(long)-cut > MaxBacklog/2 {
		t.Errorf("kept %d bytes, want at most %d", len(long)-cut, MaxBacklog/2)
	}
	rest := strings.Repeat("r", MaxBacklog/2-1)
	near := []byte(strings.Repeat("w", MaxBacklog) + "zz\n" + rest)
	if cut = skipTo(near); string(near[cut:]) != rest {
		t.Errorf("cut at %d leaves %.20q, want the line end near the byte bound", cut, near[cut:])
	}
}

func TestVTReplay(t *testing.T) {
	var out bytes.Buffer
	out.WriteString("\x1b]0;replayed\x07")
	for i := range 100000 {
		fmt.Fprintf(&out, "%d\r\n", i)
	}
	out.WriteString("\x1b[?1049h\x1b[Hfull screen")
	a := Replay(20, 4, out.Bytes())
	b := Replay(20, 4, out.Bytes())
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("replays differ:\n%+v\n%+v", a, b)
	}
	if a.Lines[0] != "full screen" || !a.AltScreen || a.SkippedBytes == 0 || a.Title != "" {
		// The title was set in the skipped part.
		t.Errorf("replay: %+v", a)
	}
	small := Replay(0, 0, []byte("one\r\ntwo"))
	if small.Cols != DefaultCols || small.Lines[1] != "two" || small.SkippedBytes != 0 {
		t.Errorf("small replay: %+v", small)
	}
}

func TestVTDefaultsAndClose(t *testing.T) {
	term := New(0, 0)
	s := term.Snapshot()
	if s.Cols != DefaultCols || s.Rows != DefaultRows || s.CursorRow != 1 || s.CursorCol != 1 {
		t.Errorf("default snapshot %dx%d cursor %d,%d", s.Cols, s.Rows, s.CursorRow, s.CursorCol)
	}
	term.Close()
	term.Close()
	write(t, term, "after close\x1b[6n") // ignored, must not block or panic
	term.Resize(10, 10)
	term.Snapshot()
	if _, ok := <-term.Replies(); ok {
		t.Error("Replies open after Close")
	}
}

func BenchmarkVTEmulate(b *testing.B) {
	term := New(DefaultCols, DefaultRows)
	defer term.Close()
	var sb strings.Builder
	for i := 0; sb.Len() < 64<<10; i++ {
		fmt.Fprintf(&sb, "\x1b[32mline %d\x1b[0m of some ordinary build output, with colour\r\n", i)
	}
	chunk := []byte(sb.String())
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		term.Write(chunk)
		term.Flush()
	}
}

// BenchmarkVTWrite is what the PTY pump pays per chunk.
func BenchmarkVTWrite(b *testing.B) {
	term := New(DefaultCols, DefaultRows)
	defer term.Close()
	chunk := []byte(strings.Repeat("some ordinary build output, no colour\r\n", 1700))
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		term.Write(chunk)
	}
}
