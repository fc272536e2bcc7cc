package engine

import (
	"errors"
	"strings"
	"time"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/ledger"
	"github.com/conchsh/conch/internal/supervisor"
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
	e.ledgerQ = make(chan ledger.Record, 1024)
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
		batch := make([]ledger.Record, 0, 64)
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
			got, err := l.AppendBatch(batch)
			if errors.Is(err, ledger.ErrInvalid) && len(batch) > 1 {
				// One bad record must not cost the others: retry one by one.
				for _, r := range batch {
					if _, err := l.Append(r); err != nil {
						e.log.Error("ledger append", "type", r.Type, "err", err)
					}
				}
				continue
			}
			if err != nil {
				e.log.Error("ledger append", "records", len(batch), "written", len(got), "type", batch[0].Type, "err", err)
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

// appendLedger queues a record. gated records are written whatever
// ledger.scope says; the others only with scope "all" (the default).
func (e *Engine) appendLedger(r ledger.Record, gated bool) {
	if !gated && e.conf().Ledger.Scope == "gated" {
		return
	}
	e.lmu.RLock()
	defer e.lmu.RUnlock()
	if e.ledgerQ == nil || e.ledgerClosed {
		return
	}
	e.ledgerQ <- r
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

// ledgerEnd records a session's end.
func (e *Engine) ledgerEnd(s *session, ex supervisor.Exit, gated bool) {
	e.appendLedger(ledger.Record{Type: ledger.TypeEnd, Agent: s.agent, Fields: ledger.End{
		SessionID: s.id, State: ex.State, ExitCode: ex.ExitCode, Signal: deref(ex.Signal), KilledBy: deref(ex.KilledBy),
		DurationMs: ex.DurationMs, OutputBytes: ex.OutputBytes, OutputSHA256: ex.OutputSha256,
		DescendantsKilled: ex.DescendantsKilled,
	}}, gated)
}
