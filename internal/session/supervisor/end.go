package supervisor

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// filesDelay is how long a shared supervisor's session runs before its meta.json and
// state.json are written.
const filesDelay = 250 * time.Millisecond

// writeFiles writes meta.json, then state.json from the spec unless the
// engine has written one (a torn pair can only lack state.json, which the
// engine recovers from meta.json).
func (s *sup) writeFiles() error {
	if err := proto.WriteMeta(s.dir, *s.meta); err != nil {
		return err
	}
	if len(s.spec.State) > 0 {
		if err := proto.CreateState(s.dir, s.spec.State); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// flushFiles writes a shared supervisor session's meta.json and state.json if they are
// due and the engine has not released the session.
func (s *sup) flushFiles() {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if !s.filesDue || s.released {
		return
	}
	s.filesDue = false
	if err := s.writeFiles(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logf("%v", err)
		s.filesOwed = true
		s.retryWrites()
	}
}

// retryWrites starts, once, the retry of the files that could not be
// written: every 100 ms at first, then every 5 s, until all are on disk
// or the engine has removed the session. Meanwhile the supervisor keeps
// them in memory and serves them on its socket.
func (s *sup) retryWrites() {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	if s.retryDone != nil {
		return
	}
	done := make(chan struct{})
	s.retryDone = done
	go func() {
		defer close(done)
		wait := 100 * time.Millisecond
		for {
			select {
			case <-time.After(wait):
			case <-s.releasedCh:
				return
			}
			if _, err := os.Stat(s.dir); err != nil {
				return // the engine removed the session
			}
			if s.payOwed() {
				s.logf("the files kept in memory are written")
				return
			}
			wait = min(2*wait, 5*time.Second)
		}
	}()
}

// payOwed writes what is owed and reports whether nothing is left.
func (s *sup) payOwed() bool {
	paid := true
	s.fileMu.Lock()
	if s.filesOwed && !s.released {
		if err := s.writeFiles(); err != nil {
			paid = false
		} else {
			s.filesOwed = false
		}
	}
	s.fileMu.Unlock()
	s.exitMu.Lock()
	if s.writeExitLocked() != nil {
		paid = false
	}
	s.exitMu.Unlock()
	return paid
}

// owed waits until the files kept in memory are written (or the session
// was removed): a supervisor that went before would leave its session
// lost, or unknown, after an engine restart. It reports whether anything
// was owed.
func (s *sup) owed() bool {
	s.retryMu.Lock()
	done := s.retryDone
	s.retryMu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
	}
	s.logf("waiting for disk space to write the end state kept in memory")
	<-done
	return true
}

// release records that the engine is done with the session (it removes
// its directory): nothing more is written there.
func (s *sup) release() {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if !s.released {
		s.released = true
		close(s.releasedCh)
	}
}

func (s *sup) isReleased() bool {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	return s.released
}

// run waits for the main process, settles output and descendants, and
// commits the end state: the steps below, in order.
func (s *sup) run() {
	<-s.mainExited
	end := time.Now()
	// The exit status is on disk before the settle, unless the end state
	// is final within 100 ms (the common case: that saves an inode and a
	// rename per session). A supervisor that dies in between leaves the
	// session lost instead of exited.
	provisional := s.exitRecord(end, 0, false)
	exitTimer := time.AfterFunc(100*time.Millisecond, func() { s.writeExitOnce(provisional, false) })
	defer exitTimer.Stop()

	pumped := make(chan struct{})
	go func() { s.outputs.Wait(); close(pumped) }()
	s.settle(pumped)
	s.waitHeldOutput(pumped)
	left := s.endDescendants()
	s.drainOutput(pumped)
	s.dropStdin()
	ex := s.exitRecord(end, left, true)
	exitTimer.Stop()
	// A shared supervisor reports the end first and writes exit.json a moment later,
	// and only if the session's directory is still there then: a
	// foreground call's directory is removed by the engine as soon as
	// the result is out, and the file was a third of a shared supervisor's disk work.
	// Until the file is written the shared supervisor keeps the session, so an engine
	// that restarts meanwhile learns the end state from it instead.
	deferred := s.deferExit()
	if !deferred {
		s.writeExitOnce(ex, true)
	}
	s.publishEnd(ex)
	s.closeSession()
	if s.shared {
		s.finishInHost(ex, deferred)
	}
	close(s.done)
}

// settle waits for the output pumps to end, at most the spec's settle
// time (250 ms by default) after the main process exited.
func (s *sup) settle(pumped <-chan struct{}) {
	settle := time.Duration(s.spec.SettleMs) * time.Millisecond
	if settle <= 0 {
		settle = 250 * time.Millisecond
	}
	select {
	case <-pumped:
	case <-time.After(settle):
	}
}

// waitHeldOutput gives a disk that holds output back (a journal that
// cannot be written) a chance to free up before the end state is final:
// up to 60 s for a command that ended by itself, none for a killed one,
// whose output the disk cannot take is counted, not waited for.
func (s *sup) waitHeldOutput(pumped <-chan struct{}) {
	held, _ := s.journalErr.Load().(string)
	if held == "" {
		return
	}
	s.mu.Lock()
	killed := s.killedBy != ""
	s.mu.Unlock()
	if killed {
		s.abandonOutput("killed")
		return
	}
	s.logf("the command ended with output held back (%s); waiting up to 60 s for the journal", held)
	select {
	case <-pumped:
	case <-time.After(60 * time.Second):
		s.abandonOutput("no space after 60 s")
	}
}

// endDescendants gives the descendants a command that ended by itself
// left behind the kill sequence too (a session never stays open because
// a grandchild holds a pipe), or waits for a kill under way to take the
// tree. It returns how many were left.
func (s *sup) endDescendants() int {
	s.mu.Lock()
	killing := s.killing
	s.mu.Unlock()
	if killing {
		s.waitTreeGone(s.grace() + 2*time.Second)
		return 0
	}
	if s.spec.Sandbox != nil {
		// bwrap's own processes (the monitor, the namespace's init)
		// end right after the command: they are not leftovers.
		s.waitTreeGone(200 * time.Millisecond)
	}
	left := len(s.cont.members())
	if left > 0 {
		s.treeKill(s.grace())
	} else {
		s.killInside(s.grace())
	}
	return left
}

// drainOutput reads the output to its end once the tree is gone, and
// stops reading what a process outside the tree still holds open, so
// the pumps end before the journal closes.
func (s *sup) drainOutput(pumped <-chan struct{}) {
	if s.ptmx != nil {
		s.ptyTreeGone()
		// All slaves are closed once the group is gone; reading to EIO
		// keeps the last bytes. A stray holder outside the tree must not
		// keep us open forever.
		select {
		case <-pumped:
		case <-time.After(2 * time.Second):
		}
		// The screen stays readable for the op screen; only the
		// replies stop.
		s.term.Close()
		<-s.answered
		s.ptmx.Close()
	}
	select {
	case <-pumped:
	case <-time.After(2 * time.Second):
		// A process outside the tree (it left the cgroup) still holds
		// a pipe: stop reading it.
		s.logf("output pipes still open 2s after the tree was killed; closing")
		for _, r := range s.readers {
			r.Close()
		}
		select {
		case <-pumped:
		case <-time.After(2 * time.Second):
			s.logf("output pumps did not end")
		}
	}
}

// dropStdin closes the command's stdin pipe, if it is still open.
func (s *sup) dropStdin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stdin != nil {
		s.stdin.Close()
		s.stdin = nil
	}
}

// publishEnd makes ex the final end state, sends it to the subscribers
// (a single supervisor makes it durable meanwhile) and gives them a
// moment to receive it.
func (s *sup) publishEnd(ex proto.Exit) {
	s.mu.Lock()
	s.final = &ex
	subs := s.subs
	s.mu.Unlock()
	close(s.finalSet)
	for _, sub := range subs {
		sub.kickNow()
	}
	if !s.shared {
		s.persist()
	}
	deadline := time.After(2 * time.Second)
	for _, sub := range subs {
		select {
		case <-sub.gone:
		case <-deadline:
		}
	}
}

// closeSession stops serving the session: a single supervisor first
// makes an end state that had to wait for the disk durable (it stays
// served on the socket until it is on disk); then the socket and the
// cgroups go.
func (s *sup) closeSession() {
	if !s.shared && s.owed() {
		if err := proto.PersistExit(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.logf("%v", err)
		}
	}
	if s.ln != nil {
		s.ln.Close()
		os.Remove(s.spec.Socket)
	}
	s.cont.remove()
}

// finishInHost ends a shared supervisor's session: it makes the end durable a moment
// later, and not at all for a session whose directory the engine has
// removed by then (a foreground call that returned its result): on a
// busy gateway those fsyncs were a tenth of the CPU. (The engine renames
// a directory before it deletes it, so a directory seen here takes no
// file after it is gone.) The deferred final exit.json is written then.
func (s *sup) finishInHost(ex proto.Exit, deferred bool) {
	select {
	case <-time.After(250 * time.Millisecond):
	case <-sharedRetired:
	case <-s.releasedCh:
	}
	s.flushFiles()
	if _, err := os.Stat(s.dir); err == nil && !s.isReleased() {
		if deferred {
			s.writeExitOnce(ex, true)
		}
		s.owed()
		s.persist()
	} else {
		s.jmu.Lock()
		s.j.CloseUnsynced()
		s.jmu.Unlock()
	}
	sharedSessions.remove(s)
}

// persist makes the journal and exit.json, which every process already
// sees, survive a machine crash too. (The engine may delete a foreground
// session's directory meanwhile; that is not an error.)
func (s *sup) persist() {
	s.jmu.Lock()
	if err := s.j.Close(); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.logf("journal close: %v", err)
	}
	s.jmu.Unlock()
	if err := proto.PersistExit(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.logf("%v", err)
	}
}

func (s *sup) exitRecord(end time.Time, descendants int, final bool) proto.Exit {
	ooms := s.cont.oomKills() // read before the lock: a file
	var refused uint64
	s.mu.Lock()
	first := s.hits == nil
	s.mu.Unlock()
	if first {
		refused = s.cont.pidsRefused()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hits == nil {
		// Counted once, when the main process has ended: the end's
		// sweep of what it left refuses forks on purpose.
		s.hits = &proto.LimitHits{OOMKills: ooms, MemoryBytes: s.memLimit, PidsRefused: refused, Pids: s.pidsLimit}
	}
	ws := s.mainStatus
	ex := proto.Exit{
		EndedAt:    end.UnixMilli(),
		DurationMs: end.Sub(s.started).Milliseconds(),
		TimedOut:   s.timedOut,
		Final:      final,
	}
	switch {
	case ws.Exited():
		c := ws.ExitStatus()
		ex.ExitCode = &c
		ex.State = proto.StateExited
	case ws.Signaled():
		name := signalName(ws.Signal())
		if name == "" {
			name = fmt.Sprintf("SIG%d", int(ws.Signal()))
		}
		ex.Signal = &name
		ex.State = proto.StateSignaled
	}
	if s.killedBy != "" {
		by := string(s.killedBy)
		ex.KilledBy = &by
		ex.State = proto.StateKilled
	} else if ooms > 0 && (ws.Signaled() && ws.Signal() == syscall.SIGKILL || ws.Exited() && ws.ExitStatus() == 128+int(syscall.SIGKILL)) {
		// The kernel's OOM killer ended the main process (or the
		// child whose status a shell passed on, 128+9) for the
		// session's memory limit: a kill, and its cause.
		by := string(proto.KilledByOOM)
		ex.KilledBy = &by
		ex.State = proto.StateKilled
		ex.Reason = oomReason(s.memLimit)
	}
	oomEnded := ex.KilledBy != nil && *ex.KilledBy == string(proto.KilledByOOM)
	if h := *s.hits; h.PidsRefused > 0 || h.OOMKills > 0 && !oomEnded {
		if oomEnded {
			h.OOMKills = 0 // the kill is the end state's
		}
		ex.LimitHits = &h
	}
	ex.DescendantsKilled = descendants + s.killCount
	s.jmu.Lock()
	ex.OutputBytes = s.j.Cursor()
	ex.DroppedBytes = s.j.Stat().DroppedBytes
	ex.UnrecordedBytes = s.unrecorded.Load()
	if final {
		ex.OutputSha256 = hex.EncodeToString(s.sum.Sum(nil))
	}
	s.jmu.Unlock()
	return ex
}

// writeExitOnce writes exit.json; once the final record is written, a
// provisional one no longer is.
func (s *sup) writeExitOnce(ex proto.Exit, final bool) {
	s.exitMu.Lock()
	defer s.exitMu.Unlock()
	if s.exitFinal {
		return
	}
	s.exitFinal = final
	if final {
		// A second copy of the end state, in the journal, for an engine
		// that finds exit.json damaged (ReadExit).
		if b, err := json.Marshal(ex); err == nil {
			s.jmu.Lock()
			if err := s.j.AppendEnd(b); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.logf("journal end record: %v", err)
			}
			s.jmu.Unlock()
		}
	}
	s.exitDue = &ex
	if err := s.writeExitLocked(); err != nil {
		s.logf("%v (kept in memory until it can be written)", err)
		s.retryWrites()
	}
}

// writeExitLocked writes the due exit record, if any; one that cannot be
// written stays due (s.exitMu must be held).
func (s *sup) writeExitLocked() error {
	if s.exitDue == nil {
		return nil
	}
	if err := proto.WriteExit(s.dir, *s.exitDue); err != nil {
		if errors.Is(err, os.ErrNotExist) { // the engine removed the session
			s.exitDue = nil
			return nil
		}
		return err
	}
	s.exitDue = nil
	s.exitWritten = true
	return nil
}

// deferExit reports whether the final exit.json may wait for the
// directory check of a shared supervisor: not when a provisional record is on disk,
// which the final one must replace at once.
func (s *sup) deferExit() bool {
	s.exitMu.Lock()
	defer s.exitMu.Unlock()
	return s.shared && !s.exitWritten
}
