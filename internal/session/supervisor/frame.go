//go:build unix

package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// Frames over a SOCK_STREAM unix socket: what an engine–shared supervisor link needs
// where there is no SOCK_SEQPACKET for AF_UNIX (macOS). A stream keeps no
// message boundaries, so each message is a frame: a 4-byte big-endian
// payload length, then the payload. The descriptors of a frame travel as
// SCM_RIGHTS with its header, in the same sendmsg; the reader takes them
// from the recvmsg that reads the header's first byte (the kernel never
// merges data across a sendmsg that carries control data). EOF between
// frames is the peer closing, the signal a shared supervisor takes as "engine gone".
// The macOS link does not use this yet (no shared supervisors there); it is tested here
// over a Linux SOCK_STREAM socketpair.

// maxFrame bounds a frame's payload: a spec, inline, is at most
// maxInlineSpec.
const maxFrame = maxInlineSpec + 1024

// maxFrameFDs is the most descriptors one frame carries.
const maxFrameFDs = 4

// errFrameTooLarge is the error for a frame header announcing more than
// maxFrame bytes: a corrupt or hostile stream, which cannot be resynced.
var errFrameTooLarge = errors.New("frame too large")

// appendFrameHeader appends the header of a payload of n bytes.
func appendFrameHeader(b []byte, n int) []byte { return binary.BigEndian.AppendUint32(b, uint32(n)) }

// frameLen decodes a header, refusing lengths above maxFrame.
func frameLen(h [4]byte) (int, error) {
	n := binary.BigEndian.Uint32(h[:])
	if n > maxFrame {
		return 0, fmt.Errorf("%w: %d bytes, at most %d", errFrameTooLarge, n, maxFrame)
	}
	return int(n), nil
}

// writeFrame sends payload and fds as one frame.
func writeFrame(c *net.UnixConn, payload []byte, fds []int) error {
	if len(payload) > maxFrame {
		return fmt.Errorf("write frame: %w: %d bytes", errFrameTooLarge, len(payload))
	}
	if len(fds) > maxFrameFDs {
		return fmt.Errorf("write frame: %d descriptors, at most %d", len(fds), maxFrameFDs)
	}
	msg := append(appendFrameHeader(make([]byte, 0, 4+len(payload)), len(payload)), payload...)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, _, err := c.WriteMsgUnix(msg, oob, nil)
	if err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	// The control data went with the first byte; the rest of a frame
	// that did not fit is plain stream data.
	if _, err := c.Write(msg[n:]); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// readFrame reads one frame. io.EOF means the peer closed between frames;
// a stream that ends inside a frame is io.ErrUnexpectedEOF. Descriptors
// received are returned even with an error, for the caller to close.
func readFrame(c *net.UnixConn) (payload []byte, fds []int, err error) {
	var h [4]byte
	oob := make([]byte, unix.CmsgSpace(maxFrameFDs*4))
	got := 0
	for got < len(h) {
		n, oobn, _, _, err := c.ReadMsgUnix(h[got:], oob)
		if oobn > 0 {
			fs, perr := parseRights(oob[:oobn])
			fds = append(fds, fs...)
			if perr != nil {
				return nil, fds, fmt.Errorf("read frame: %w", perr)
			}
		}
		got += n
		if err != nil {
			if errors.Is(err, io.EOF) && got > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, fds, err
		}
		if n == 0 {
			if got == 0 {
				return nil, fds, io.EOF
			}
			return nil, fds, io.ErrUnexpectedEOF
		}
	}
	n, err := frameLen(h)
	if err != nil {
		return nil, fds, fmt.Errorf("read frame: %w", err)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(c, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fds, fmt.Errorf("read frame: %w", err)
	}
	return payload, fds, nil
}
