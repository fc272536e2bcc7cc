//go:build unix

package supervisor

import "time"

// releaseSlave closes the supervisor's own copy of the PTY slave, which
// it keeps where the OS discards unread output once no slave is open
// (holdPTYSlave): after the command has exited, once the master has been
// read to empty, or after 2 s if the output is never read (a journal
// that cannot be written holds the pump). Closing it lets the master
// reach its end as soon as the rest of the tree has closed theirs. It is
// called once, by a goroutine spawn starts (counted in s.outputs); a nil
// slave (not held) does nothing.
func (s *sup) releaseSlave() {
	if s.slave == nil {
		return
	}
	rc, err := s.ptmx.SyscallConn()
	deadline := time.Now().Add(2 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		n := 0
		var perr error
		// Control keeps the master non-blocking (Fd would not).
		if err = rc.Control(func(fd uintptr) { n, perr = ptyPending(int(fd)) }); err != nil || perr != nil || n == 0 {
			break
		}
		// The pump reads what is pending; look again shortly.
		time.Sleep(2 * time.Millisecond)
	}
	s.slave.Close()
	s.slave = nil
}
