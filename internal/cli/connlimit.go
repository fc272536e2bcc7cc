package cli

import (
	"net"
	"sync"
	"time"
)

// The gateway's process shares one descriptor table between its listeners
// and its engine (session pipes, journals, supervisor sockets, the
// ledger). Clients that open connections and never finish or close them
// (a request body that never ends, keep-alive connections a careless
// client leaks) must not use it up: each listener holds at most a share
// of the descriptor limit, further connections wait in the kernel's
// accept queue until one closes, and idle keep-alive connections are
// closed after httpIdleTimeout.

// httpIdleTimeout closes keep-alive connections idle that long.
const httpIdleTimeout = 2 * time.Minute

// connCaps returns the most connections the TCP listener and the engine
// socket each hold at once: half and an eighth of the descriptor limit,
// which leaves at least three eighths to the engine.
func connCaps() (tcp, sock int) {
	n := descriptorLimit()
	return max(n/2, 32), max(n/8, 16)
}

// limitListener accepts a connection only while fewer than its cap are
// open.
type limitListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

func limitConns(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
