package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// damageLog counts the damaged state files the engine found, by kind
// (meta, state, exit, journal, idempotency), for /metrics, and remembers
// which it has reported so that a file read again and again is logged
// and counted once.
type damageLog struct {
	mu   sync.Mutex
	n    map[string]int64
	seen map[string]bool
	// writeFails counts the writes of session state that failed, by
	// file (exit, state, meta): see writeFailed.
	writeFails map[string]int64
}

// writeFailed logs and counts a failed write of a session's state file
// (file is exit, state or meta), for /metrics. The caller keeps the
// state in memory and makes what it reports honest about the file.
func (e *Engine) writeFailed(file, session string, err error) {
	d := &e.damage
	d.mu.Lock()
	if d.writeFails == nil {
		d.writeFails = map[string]int64{}
	}
	d.writeFails[file]++
	d.mu.Unlock()
	e.log.Warn("session state not written", "file", file+".json", "session", session, "err", err)
}

// WriteFailures returns how many writes of session state files failed
// since the engine started, by file (exit, state, meta).
func (e *Engine) WriteFailures() map[string]int64 {
	d := &e.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int64, len(d.writeFails))
	for k, v := range d.writeFails {
		out[k] = v
	}
	return out
}

// recordExit writes ex as the exit.json of s (fsynced if durable) and
// returns it; a write that fails (other than for a directory already
// removed) is logged and counted, and the returned end state says it was
// not recorded.
func (e *Engine) recordExit(s *session, ex proto.Exit, durable bool) proto.Exit {
	write := proto.WriteExit
	if durable {
		write = proto.WriteExitDurable
	}
	if err := write(s.dir, ex); err != nil && !errors.Is(err, os.ErrNotExist) {
		e.writeFailed("exit", s.id, err)
		ex.NotRecorded = err.Error()
	}
	return ex
}

// damaged logs and counts a damaged state file at path (once per path
// until forgetDamage) and what the engine did about it.
func (e *Engine) damaged(kind, path string, err error, recovery string) {
	d := &e.damage
	d.mu.Lock()
	if d.seen[path] {
		d.mu.Unlock()
		return
	}
	if d.n == nil {
		d.n, d.seen = map[string]int64{}, map[string]bool{}
	}
	d.seen[path] = true
	d.n[kind]++
	d.mu.Unlock()
	e.log.Warn("damaged state file", "kind", kind, "path", path, "err", err, "recovery", recovery)
}

// forgetDamage drops what damaged remembers about the files under dir (a
// removed session).
func (e *Engine) forgetDamage(dir string) {
	d := &e.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.seen) == 0 {
		return
	}
	for p := range d.seen {
		if p == dir || filepath.Dir(p) == dir {
			delete(d.seen, p)
		}
	}
}

// DamageCounts returns how many damaged state files of each kind the
// engine has found since it started, kinds sorted.
func (e *Engine) DamageCounts() ([]string, map[string]int64) {
	d := &e.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int64, len(d.n))
	var kinds []string
	for k, v := range d.n {
		out[k] = v
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds, out
}

// readExit is proto.ReadExit that logs and counts a damaged
// exit.json and repairs it from the copy it was recovered from (the
// journal's end record).
func (e *Engine) readExit(dir string) (proto.Exit, bool, error) {
	ex, ok, err := proto.ReadExit(dir)
	if err == nil || !errors.Is(err, fsutil.ErrDamaged) {
		return ex, ok, err
	}
	path := proto.ExitPath(dir)
	if ok {
		e.damaged("exit", path, err, "end state taken from the journal's end record; file rewritten")
		if werr := proto.WriteExit(dir, ex); werr != nil && !errors.Is(werr, os.ErrNotExist) {
			e.writeFailed("exit", filepath.Base(dir), werr)
		}
		return ex, true, nil
	}
	e.damaged("exit", path, err, "no intact copy: the end state is asked of the supervisor, else the session is lost")
	return ex, false, err
}

// readMeta reads a session's meta.json. When the file is damaged it asks
// the session's supervisor, which holds the record in memory (on the
// session's own socket, or on the socket of the host serving it), and
// rewrites the file from the answer.
func (e *Engine) readMeta(id, dir string, m *proto.Meta) error {
	err := fsutil.ReadJSON(proto.MetaPath(dir), m)
	if err == nil || !errors.Is(err, fsutil.ErrDamaged) {
		return err
	}
	path := proto.MetaPath(dir)
	if live, ok := supervisor.LiveMeta(id, e.socketPath(id), filepath.Join(e.home, "run", "s"), e.fallbackSocketDir()); ok {
		*m = live
		e.damaged("meta", path, err, "record taken from the running supervisor; file rewritten")
		if werr := proto.WriteMeta(dir, *m); werr != nil && !errors.Is(werr, os.ErrNotExist) {
			e.writeFailed("meta", id, werr)
		}
		return nil
	}
	e.damaged("meta", path, err, "no supervisor answers for the session: its processes are swept by cgroup and it is reported lost")
	*m = proto.Meta{}
	return err
}

// journalDamage logs and counts (once per session) the output a read of
// s's journal found unreadable.
func (e *Engine) journalDamage(s *session, res readResult) {
	if res.unreadable > 0 {
		e.damaged("journal", s.journal(), fmt.Errorf("%d output bytes unreadable", res.unreadable), "skipped; the read resynchronised on the next intact record")
	}
}

// outputEnd is how much output s recorded in all, from its exit record (0
// while it runs or if unknown).
func (s *session) outputEnd() int64 {
	_, ex, _ := s.snapshot()
	return outputEndOf(ex)
}

func outputEndOf(ex *proto.Exit) int64 {
	if ex == nil {
		return 0
	}
	return ex.OutputBytes
}

// cleanRun removes what dead supervisors left behind: sockets and host
// logs in run/ and empty session cgroups. It runs when the engine starts
// (after reattach, so that every live session's socket is known to be
// served) and at every sweep.
func (e *Engine) cleanRun() {
	for _, p := range supervisor.CleanRun(e.home, filepath.Join(e.home, "run", "s"), e.fallbackSocketDir()) {
		e.log.Info("removed a dead supervisor's file", "path", p)
	}
	if n := supervisor.RemoveEmptyCgroups(); n > 0 {
		e.log.Info("removed empty session cgroups", "count", n)
	}
}
