//go:build unix

package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func streamPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "stream")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

type testFrame struct {
	payload []byte
	reads   []*os.File // read ends of pipes whose write ends are sent
	writes  []*os.File
}

// TestFramesOverStream: generated frames (empty to maxFrame bytes, with
// 0 to 4 descriptors each, sent back to back) arrive whole, in order,
// each with its own descriptors, over a SOCK_STREAM socketpair (the
// transport macOS has); the peer closing between frames is io.EOF.
func TestFramesOverStream(t *testing.T) {
	a, b := streamPair(t)
	var frames []testFrame
	for i, n := range []int{0, 1, 3, 4, 5, 1000, 64 << 10, 100 << 10 / 2, maxFrame, 7} {
		f := testFrame{payload: bytes.Repeat([]byte{byte('a' + i)}, n)}
		for k := 0; k < i%(maxFrameFDs+1); k++ {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close(); w.Close() })
			f.reads, f.writes = append(f.reads, r), append(f.writes, w)
		}
		frames = append(frames, f)
	}
	errs := make(chan error, 1)
	go func() {
		defer a.CloseWrite()
		for i, f := range frames {
			var fds []int
			for _, w := range f.writes {
				fds = append(fds, int(w.Fd()))
			}
			if err := writeFrame(a, f.payload, fds); err != nil {
				errs <- fmt.Errorf("frame %d: %w", i, err)
				return
			}
		}
		errs <- nil
	}()
	for i, f := range frames {
		payload, fds, err := readFrame(b)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(payload, f.payload) {
			t.Fatalf("frame %d: %d bytes, want %d", i, len(payload), len(f.payload))
		}
		if len(fds) != len(f.reads) {
			t.Fatalf("frame %d: %d descriptors, want %d", i, len(fds), len(f.reads))
		}
		for k, fd := range fds {
			w := os.NewFile(uintptr(fd), "received")
			fmt.Fprintf(w, "%d.%d", i, k)
			w.Close()
			buf := make([]byte, 16)
			n, _ := f.reads[k].Read(buf)
			if got, want := string(buf[:n]), fmt.Sprintf("%d.%d", i, k); got != want {
				t.Fatalf("frame %d descriptor %d reached %q, want %q", i, k, got, want)
			}
		}
	}
	if _, _, err := readFrame(b); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// TestFrameDamage: a stream that ends inside a header or a payload is
// io.ErrUnexpectedEOF, a header over the limit is errFrameTooLarge, and
// an oversized write is refused before anything is sent.
func TestFrameDamage(t *testing.T) {
	for name, raw := range map[string][]byte{
		"half header":   {0, 0},
		"short payload": append(appendFrameHeader(nil, 10), "abc"...),
	} {
		a, b := streamPair(t)
		a.Write(raw)
		a.CloseWrite()
		if _, _, err := readFrame(b); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: %v, want io.ErrUnexpectedEOF", name, err)
		}
	}
	a, b := streamPair(t)
	a.Write(appendFrameHeader(nil, maxFrame+1))
	if _, _, err := readFrame(b); !errors.Is(err, errFrameTooLarge) {
		t.Errorf("oversized header: %v", err)
	}
	if err := writeFrame(a, make([]byte, maxFrame+1), nil); !errors.Is(err, errFrameTooLarge) {
		t.Errorf("oversized write: %v", err)
	}
}

// TestPeerUID: the per-OS peer-credential call (SO_PEERCRED here,
// LOCAL_PEERCRED on macOS) names this process's uid for both ends of a
// unix socket pair.
func TestPeerUID(t *testing.T) {
	a, b := streamPair(t)
	for _, c := range []*net.UnixConn{a, b} {
		uid, err := PeerUID(c)
		if err != nil || uid != os.Getuid() {
			t.Fatalf("PeerUID = %d, %v; want %d", uid, err, os.Getuid())
		}
	}
}
