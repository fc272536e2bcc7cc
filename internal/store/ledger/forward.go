package ledger

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Forward configures the forwarding of ledger records to a log collector off the
// ledger's files: syslog (RFC 3164 lines, facility authpriv, severity info) over a unix
// datagram or stream socket, UDP or TCP, or journald's native protocol. Every record
// written is sent as its canonical JSON line, and every HEAD update as
// "checkpoint <seq>:<hash>:<ms>:<sig>" ([Checkpoint]).
//
// Forwarding is best effort and never blocks an append: messages wait in a bounded
// queue (forwardQueue) for one sender goroutine; when the queue is full, or the
// collector cannot be reached or does not take a message within forwardTimeout, the
// message is dropped and counted, and the next message that goes out is preceded by
// "forward-gap dropped=<n>".
type Forward struct {
	// Network is "unixgram" (the default), "unix", "udp", "tcp" or "journald".
	Network string
	// Address is the socket path or host:port. The default is /dev/log, and
	// /run/systemd/journal/socket for journald.
	Address string
	// Tag is the syslog tag (journald's SYSLOG_IDENTIFIER); "conch-ledger" by default.
	Tag string
}

const (
	forwardQueue   = 4096
	forwardTimeout = 2 * time.Second
	// forwardRedial is how long the sender waits after a failed dial before it dials
	// again (messages meanwhile are dropped and counted).
	forwardRedial = time.Second
	// forwardDrain bounds how long close waits for queued messages to go out.
	forwardDrain = 2 * time.Second
	// facility authpriv (10) and severity info (6).
	syslogPriority = 10<<3 | 6
)

// ValidateForward checks a Forward configuration without connecting.
func ValidateForward(f Forward) error {
	switch f.Network {
	case "", "unixgram", "unix", "udp", "tcp", "journald":
	default:
		return fmt.Errorf("ledger forward: unknown network %q (want unixgram, unix, udp, tcp or journald)", f.Network)
	}
	if (f.Network == "udp" || f.Network == "tcp") && f.Address == "" {
		return fmt.Errorf("ledger forward: network %s needs an address (host:port)", f.Network)
	}
	return nil
}

// forwarder sends messages to one collector from one goroutine, which close waits for.
type forwarder struct {
	cfg     Forward
	q       chan string
	dropped atomic.Int64 // messages dropped since the last forward-gap notice went out
	done    chan struct{}
	abort   chan struct{} // closed when close stops waiting for the queue

	mu   sync.Mutex // guards conn (the sender dials and writes; close may close it)
	conn net.Conn

	host string
	pid  int
}

func newForwarder(f Forward) (*forwarder, error) {
	if err := ValidateForward(f); err != nil {
		return nil, err
	}
	if f.Network == "" {
		f.Network = "unixgram"
	}
	if f.Address == "" {
		f.Address = "/dev/log"
		if f.Network == "journald" {
			f.Address = "/run/systemd/journal/socket"
		}
	}
	if f.Tag == "" {
		f.Tag = "conch-ledger"
	}
	host, _ := os.Hostname()
	fw := &forwarder{cfg: f, q: make(chan string, forwardQueue), done: make(chan struct{}), abort: make(chan struct{}), host: host, pid: os.Getpid()}
	go fw.run()
	return fw, nil
}

// send queues msg, or counts it dropped when the queue is full. It never blocks.
func (fw *forwarder) send(msg string) {
	select {
	case fw.q <- msg:
	default:
		fw.dropped.Add(1)
	}
}

// close stops the sender after it has sent what is queued, or after forwardDrain.
func (fw *forwarder) close() {
	close(fw.q)
	t := time.NewTimer(forwardDrain)
	defer t.Stop()
	select {
	case <-fw.done:
		return
	case <-t.C:
	}
	close(fw.abort)
	fw.mu.Lock()
	if fw.conn != nil {
		fw.conn.Close() // unblocks a write in progress
	}
	fw.mu.Unlock()
	<-fw.done
}

func (fw *forwarder) run() {
	defer close(fw.done)
	var nextDial time.Time
	defer func() {
		fw.mu.Lock()
		if fw.conn != nil {
			fw.conn.Close()
		}
		fw.mu.Unlock()
	}()
	for msg := range fw.q {
		select {
		case <-fw.abort:
			return
		default:
		}
		fw.mu.Lock()
		conn := fw.conn
		fw.mu.Unlock()
		if conn == nil {
			if time.Now().Before(nextDial) {
				fw.dropped.Add(1)
				continue
			}
			network := fw.cfg.Network
			if network == "journald" {
				network = "unixgram"
			}
			c, err := net.DialTimeout(network, fw.cfg.Address, forwardTimeout)
			if err != nil {
				nextDial = time.Now().Add(forwardRedial)
				fw.dropped.Add(1)
				continue
			}
			fw.mu.Lock()
			fw.conn, conn = c, c
			fw.mu.Unlock()
		}
		if n := fw.dropped.Load(); n > 0 {
			if fw.write(conn, fmt.Sprintf("forward-gap dropped=%d", n)) != nil {
				fw.reset(conn)
				fw.dropped.Add(1)
				continue
			}
			fw.dropped.Add(-n)
		}
		if fw.write(conn, msg) != nil {
			fw.reset(conn)
			fw.dropped.Add(1)
		}
	}
}

// reset drops a connection that failed; the next message dials again.
func (fw *forwarder) reset(c net.Conn) {
	c.Close()
	fw.mu.Lock()
	if fw.conn == c {
		fw.conn = nil
	}
	fw.mu.Unlock()
}

// write sends one message in the collector's format.
func (fw *forwarder) write(c net.Conn, msg string) error {
	var b strings.Builder
	switch fw.cfg.Network {
	case "journald":
		// Native protocol: KEY=VALUE lines; msg never holds a newline (canonical JSON).
		fmt.Fprintf(&b, "MESSAGE=%s\nSYSLOG_IDENTIFIER=%s\nPRIORITY=6\nSYSLOG_FACILITY=10\nSYSLOG_PID=%d\n", msg, fw.cfg.Tag, fw.pid)
	case "unixgram", "unix":
		// The local format of syslog(3), as log/syslog writes it.
		fmt.Fprintf(&b, "<%d>%s %s[%d]: %s", syslogPriority, time.Now().Format(time.Stamp), fw.cfg.Tag, fw.pid, msg)
	default:
		fmt.Fprintf(&b, "<%d>%s %s %s[%d]: %s", syslogPriority, time.Now().Format(time.RFC3339), fw.host, fw.cfg.Tag, fw.pid, msg)
	}
	if fw.cfg.Network == "tcp" || fw.cfg.Network == "unix" {
		b.WriteByte('\n') // stream sockets: one message a line
	}
	c.SetWriteDeadline(time.Now().Add(forwardTimeout))
	_, err := c.Write([]byte(b.String()))
	return err
}
