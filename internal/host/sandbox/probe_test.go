package sandbox

import (
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

// slowFactor scales deadlines on a loaded machine (CONCH_TEST_SLOW).
func slowFactor() time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv("CONCH_TEST_SLOW"), 64); err == nil && f > 1 {
		return time.Duration(f)
	}
	return 1
}

// A server that accepts and never answers the TLS handshake must not
// hold an https probe past its deadline: the deadline covers the
// handshake too.
func TestProbeHTTPSHandshakeDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		accepted <- c // held open, never written to
	}()
	defer func() {
		select {
		case c := <-accepted:
			c.Close()
		default:
		}
	}()
	url := "https://" + ln.Addr().String() + "/"
	done := make(chan bool, 1)
	start := time.Now()
	go func() { done <- ProbeDirect("http", url) }()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("a server that never answers the handshake passed the probe")
		}
		if d := time.Since(start); d < time.Second {
			t.Fatalf("the probe gave up after %v, before the server could answer", d)
		}
	case <-time.After(30 * time.Second * slowFactor()):
		t.Fatal("the https probe is still in its TLS handshake after 30 s (its deadline is 2 s)")
	}
}
