package engine

import (
	"errors"
	"strings"
	"time"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/store/ledger"
)

// The ledger is written by one goroutine in call order, so exec calls do
// not wait for its fsyncs; the records that queue up during one fsync are
// written together (ledger.AppendBatch). Close drains it.

// ledgerLinger is how long the ledger writer waits for more records
// before it writes a batch: a record is durable at most this much later
// than without it (plus the fsync), and under load a batch holds several
// records instead of one or two. At 600 execs a second, 2 ms left about
// a fifth of the gateway's CPU in the ledger's fsyncs and file work.
const ledgerLinger = 10 * time.Millisecond

func (e *Engine) startLedger() {
	l, err := ledger.Open(e.home, ledgerOptions(e.conf()))
	if err != nil {
		e.log.Warn("ledger unavailable; decisions are not recorded", "err", err)
		return
	}
	if err := l.KeyError(); err != nil {
		e.log.Error("ledger checkpoints are not signed", "err", err)
	}
	e.ledgerQ = make(chan ledgerItem, 1024)
	e.ledgerDone = make(chan struct{})
	go func() {
		defer close(e.ledgerDone)
		defer func() {
			if err := l.Close(); err != nil {
				e.log.Error("ledger close", "err", err)
			}
		}()
		// Group commit: whatever queues while the last batch is being
		// fsynced, and for up to ledgerLinger after the first record,
		// goes in the next one, in order. (Nobody waits for a record:
		// the linger only makes batches larger on a busy gateway.)
		batch := make([]ledgerItem, 0, 64)
		recs := make([]ledger.Record, 0, 64)
		for r := range e.ledgerQ {
			batch = append(batch[:0], r)
			linger := time.NewTimer(ledgerLinger)
		drain:
			for len(batch) < cap(batch) {
				select {
				case r, ok := <-e.ledgerQ:
					if !ok {
						break drain
					}
					batch = append(batch, r)
				case <-linger.C:
					break drain
				}
			}
			linger.Stop()
			// A batch the ledger fails to write is counted there and noted
			// in a gap record once writes succeed again.
			recs = recs[:0]
			for _, it := range batch {
				recs = append(recs, it.r)
			}
			got, err := l.AppendBatch(recs)
			if errors.Is(err, ledger.ErrInvalid) && len(batch) > 1 {
				// One bad record must not cost the others: retry one by one.
				for _, it := range batch {
					if out, err := l.Append(it.r); err != nil && out.Seq == 0 {
						e.log.Error("ledger append", "type", it.r.Type, "err", err)
					} else if it.written != nil {
						it.written()
					}
				}
				continue
			}
			if err != nil {
				e.log.Error("ledger append", "records", len(batch), "written", len(got), "type", batch[0].r.Type, "err", err)
			}
			for i := range got {
				if batch[i].written != nil {
					batch[i].written()
				}
			}
		}
	}()
}

// ledgerOptions are the ledger options of a configuration: rotation and
// forwarding.
func ledgerOptions(c *config.Config) ledger.Options {
	o := ledger.Options{RotateBytes: c.Ledger.RotateBytes}
	if f := c.Ledger.Forward; f != nil {
		o.Forward = &ledger.Forward{Network: strings.ToLower(f.Network), Address: f.Address, Tag: f.Tag}
	}
	return o
}

// ledgerItem is a queued record and what to do once it is in the ledger.
type ledgerItem struct {
	r       ledger.Record
	written func() // nil, or called by the ledger writer after the record is written
}

// appendLedger queues a record. gated records are written whatever
// ledger.scope says; the others only with scope "all" (the default).
func (e *Engine) appendLedger(r ledger.Record, gated bool) {
	e.appendLedgerThen(r, gated, nil)
}

// appendLedgerThen is appendLedger that calls written (from the ledger
// writer's goroutine) once the record is in the ledger.
func (e *Engine) appendLedgerThen(r ledger.Record, gated bool, written func()) {
	if !gated && e.conf().Ledger.Scope == "gated" {
		return
	}
	e.lmu.RLock()
	defer e.lmu.RUnlock()
	if e.ledgerQ == nil || e.ledgerClosed {
		return
	}
	e.ledgerQ <- ledgerItem{r, written}
}

func (e *Engine) stopLedger() {
	e.lmu.Lock()
	if e.ledgerQ != nil && !e.ledgerClosed {
		e.ledgerClosed = true
		close(e.ledgerQ)
	}
	e.lmu.Unlock()
	if e.ledgerDone != nil {
		<-e.ledgerDone
	}
}

// ledgerEnd records a session's end. Once the record is written the
// session's state says so (ledgerEnd), so that an engine that finds the
// session ended later does not record it again.
func (e *Engine) ledgerEnd(s *session, ex proto.Exit, gated bool) {
	e.ledgerEndRecord(s, ex, gated, false)
}

func (e *Engine) ledgerEndRecord(s *session, ex proto.Exit, gated, observed bool) {
	if st, _, _ := s.snapshot(); st.LedgerEnd {
		return // recorded by an earlier engine
	}
	f := ledger.End{
		SessionID: s.id, State: ex.State, ExitCode: ex.ExitCode, Signal: deref(ex.Signal), KilledBy: deref(ex.KilledBy),
		DurationMs: ex.DurationMs, OutputBytes: ex.OutputBytes, OutputSHA256: ex.OutputSha256,
		DescendantsKilled: ex.DescendantsKilled, Observed: observed,
	}
	if observed {
		f.EndedAtMs = ex.EndedAt
	}
	e.appendLedgerThen(ledger.Record{Type: ledger.TypeEnd, Agent: s.agent, Fields: f}, gated, func() {
		s.markLedger(func(st *state) { st.LedgerEnd = true })
	})
}

// observedEnd records in the ledger the end of a session found ended
// (at the engine's start) whose exec record is in the ledger and whose
// end record is not: it ended while no engine ran, or the engine died
// before its end record was written. The record says it was observed
// after the fact and carries the end state of the supervisor's files.
func (e *Engine) observedEnd(s *session, ex proto.Exit) {
	st, _, _ := s.snapshot()
	if !st.LedgerExec || st.LedgerEnd || ex.State == proto.StateDenied {
		return
	}
	e.ledgerEndRecord(s, ex, st.Gated || st.ApprovalID != "", true)
}
