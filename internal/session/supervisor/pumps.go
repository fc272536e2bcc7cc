package supervisor

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// pump copies one output stream into the journal.
// pumpBufs are the pumps' read buffers: a shared supervisor runs hundreds of short
// sessions a second, and two fresh 64 KiB buffers each were most of its
// allocation.
var pumpBufs = sync.Pool{New: func() any { return new([64 << 10]byte) }}

func (s *sup) pump(r *os.File, stream journal.Stream) {
	defer s.outputs.Done()
	bp := pumpBufs.Get().(*[64 << 10]byte)
	defer pumpBufs.Put(bp)
	buf := bp[:]
	for {
		n, err := r.Read(buf)
		if n > 0 {
			end := s.record(stream, buf[:n])
			if s.ptmx != nil {
				s.mu.Lock()
				s.modes.Write(buf[:n])
				s.mu.Unlock()
				s.term.Write(buf[:n])
			}
			s.cursor.Store(end)
			s.lastOutput.Store(time.Now().UnixNano())
			s.kick()
		}
		if err != nil {
			// EOF on a pipe, EIO on a PTY master once every slave is closed.
			if r != s.ptmx {
				r.Close()
			}
			return
		}
	}
}

// record journals p, holding on to what cannot be written yet: while the
// journal fails (a full disk), the pump retries with backoff and reads
// nothing more, so the command blocks on its output instead of losing it,
// and the status says why (Status.JournalError). Output is lost only if
// the supervisor has to end while it still holds some (see run).
func (s *sup) record(stream journal.Stream, p []byte) int64 {
	wait := 50 * time.Millisecond
	for {
		if s.abandon.Load() {
			s.unrecorded.Add(int64(len(p)))
			return s.j.Cursor()
		}
		s.jmu.Lock()
		start := s.j.Cursor()
		end, err := s.j.Append(stream, p)
		s.sum.Write(p[:end-start])
		s.jmu.Unlock()
		p = p[end-start:]
		if errors.Is(err, journal.ErrClosed) {
			// The session has ended: nothing more can be recorded.
			return end
		}
		if err == nil || len(p) == 0 {
			// All of p is recorded (an error now is a failed fsync,
			// which the next Append retries).
			if old, _ := s.journalErr.Swap("").(string); old != "" {
				s.logf("journal writable again")
			}
			return end
		}
		if old, _ := s.journalErr.Swap(err.Error()).(string); old == "" {
			s.logf("journal append: %v; holding %d bytes of output until it can be written", err, len(p))
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// abandonOutput gives up output that cannot be journaled: the pumps read
// on and count what they drop (Exit.UnrecordedBytes).
func (s *sup) abandonOutput(why string) {
	if held, _ := s.journalErr.Load().(string); held != "" && !s.abandon.Swap(true) {
		s.logf("%s: output that cannot be journaled (%s) is given up", why, held)
	}
}

// subscriber receives Events; it always gets the newest cursor and, last,
// the end state.
type subscriber struct {
	w    io.WriteCloser
	wake chan struct{}
	gone chan struct{}
}

func (s *sup) addSubscriber(w io.WriteCloser) *subscriber {
	sub := &subscriber{w: w, wake: make(chan struct{}, 1), gone: make(chan struct{})}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	go s.feed(sub)
	sub.kickNow()
	return sub
}

func (sub *subscriber) kickNow() {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (s *sup) kick() {
	s.mu.Lock()
	subs := s.subs
	s.mu.Unlock()
	for _, sub := range subs {
		sub.kickNow()
	}
}

func (s *sup) feed(sub *subscriber) {
	defer close(sub.gone)
	defer s.dropSubscriber(sub)
	defer sub.w.Close()
	enc := json.NewEncoder(sub.w)
	last := int64(-1)
	for range sub.wake {
		s.mu.Lock()
		final := s.final
		s.mu.Unlock()
		cur := s.cursor.Load()
		if final != nil {
			enc.Encode(proto.Event{Cursor: final.OutputBytes, Exit: final})
			return
		}
		if cur != last {
			if err := enc.Encode(proto.Event{Cursor: cur}); err != nil {
				return
			}
			last = cur
		}
		// Coalesce bursts to about 100 cursor events per second, but
		// never hold back the end state.
		select {
		case <-time.After(10 * time.Millisecond):
		case <-s.finalSet:
		}
	}
}

func (s *sup) dropSubscriber(sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.subs {
		if x == sub {
			s.subs = append(s.subs[:i:i], s.subs[i+1:]...)
			return
		}
	}
}
