package supervisor

import (
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrPoolClosed is returned by Pool.Start's shared supervisor path once the pool is
// closed; Start then falls back to a supervisor of the session's own.
var ErrPoolClosed = errors.New("conch engine is shutting down")

// ErrResourceExhausted marks a start that failed for want of file
// descriptors (EMFILE, ENFILE) in the engine, a shared supervisor or a
// supervisor: the session did not start. Pool.Start then backs off
// instead of starting a new shared supervisor for every call.
var ErrResourceExhausted = errors.New("out of file descriptors")

// IsResourceExhausted reports whether err is a start that failed for want
// of file descriptors.
func IsResourceExhausted(err error) bool {
	return errors.Is(err, ErrResourceExhausted) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// exhaustedBackoff bounds how often the pool starts a new shared supervisor
// after a start failed for want of file descriptors: 1 s after the first
// failure, doubling to 30 s while they go on; a start that succeeds ends
// it.
const (
	exhaustedBackoffMin = time.Second
	exhaustedBackoffMax = 30 * time.Second
)

// sharedRetireAfter is how many sessions a shared supervisor takes before the
// pool retires it for a fresh one: a shared supervisor that dies takes the supervision
// of its sessions with it.
const sharedRetireAfter = 1000

// commitTimeout is how long Start waits for a supervisor's ready report.
// A report takes milliseconds; the bound is for a supervisor that hangs,
// and is generous because a new supervisor is a fresh process of a large
// binary, which a machine under heavy load (a load average of 15 on two
// cores) was seen to start in more than 5 s.
var commitTimeout = 15 * time.Second // a variable for tests

// PoolConfig is what a Pool starts supervisors with.
type PoolConfig struct {
	// Argv is the supervisor command (`conch supervise`); Home the conch
	// home; Env the supervisors' whole environment.
	Argv []string
	Home string
	Env  []string
	// Shared runs sessions in shared supervisors (one process for many
	// sessions, which needs session cgroups) instead of a supervisor
	// each with a warm spare kept ready. DefaultShared says which.
	Shared bool
	// ArgvFunc, if set, is asked for the supervisor command at each start
	// instead of Argv (the program may change while the pool runs: a
	// shim built in the background).
	ArgvFunc func() []string
	// MaxStarting bounds concurrent supervisor start-ups (at least 1).
	MaxStarting int
	// RetireAfter is how many sessions a shared supervisor takes before it is retired
	// for a fresh one; 0 means 1000.
	RetireAfter int
	// SharedExited, if set, is called (on its own goroutine) once a shared supervisor
	// the pool started has exited.
	SharedExited func(*Shared)
	// Warn, if set, hears of what the pool worked around: a shared supervisor or a
	// spare that could not start or was unusable.
	Warn func(msg string, args ...any)
}

// Pool starts the supervisors of one engine. Where sessions share
// supervisors it keeps the current shared supervisor (and the retired ones that only
// finish their sessions); else it keeps one warm spare supervisor that
// has already paid its start-up cost. The zero Pool is not usable; make
// one with NewPool.
type Pool struct {
	cfg      PoolConfig
	starting chan struct{}
	wg       sync.WaitGroup // the spare being started

	mu        sync.Mutex
	closed    bool
	spare     *Spare
	refilling bool
	shared    *Shared   // taking new sessions
	retired   []*Shared // finishing theirs
	closing   []*Shared // the shared supervisors Close closed, for WaitShared

	// After a start failed for want of descriptors, no new shared supervisor is
	// started before exhaustedUntil; exhaustedBackoff is the next wait.
	exhaustedUntil   time.Time
	exhaustedBackoff time.Duration

	sharedStarted atomic.Int64 // shared supervisors started, for SharedStarted
}

// SharedStarted returns how many shared supervisors the pool has started.
func (p *Pool) SharedStarted() int64 { return p.sharedStarted.Load() }

// exhausted records a start that failed for want of descriptors and
// returns it as an error wrapping ErrResourceExhausted.
func (p *Pool) exhausted(err error) error {
	p.mu.Lock()
	p.exhaustedBackoff = min(max(2*p.exhaustedBackoff, exhaustedBackoffMin), exhaustedBackoffMax)
	p.exhaustedUntil = time.Now().Add(p.exhaustedBackoff)
	p.mu.Unlock()
	if errors.Is(err, ErrResourceExhausted) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrResourceExhausted, err)
}

// backingOff reports whether a start failed for want of descriptors
// less than the backoff ago.
func (p *Pool) backingOff() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Now().Before(p.exhaustedUntil)
}

// started ends a backoff: descriptors are available again.
func (p *Pool) started() {
	p.mu.Lock()
	p.exhaustedBackoff, p.exhaustedUntil = 0, time.Time{}
	p.mu.Unlock()
}

// DefaultShared reports whether sessions should run in shared supervisors:
// unless CONCH_SUPERVISOR=process asks for a process per session, and
// only where sessions get cgroups (a shared supervisor tells its sessions' processes
// apart by them).
func DefaultShared() bool {
	switch os.Getenv("CONCH_SUPERVISOR") {
	case "process":
		return false
	}
	return CgroupAvailable()
}

// NewPool returns a pool that starts supervisors as cfg says. Without
// shared supervisors it starts the first spare at once, in the background.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.MaxStarting < 1 {
		cfg.MaxStarting = 1
	}
	if cfg.RetireAfter <= 0 {
		cfg.RetireAfter = sharedRetireAfter
	}
	p := &Pool{cfg: cfg, starting: make(chan struct{}, cfg.MaxStarting)}
	// A shared supervisor starts with the first session.
	if !cfg.Shared {
		p.refillSpare()
	}
	return p
}

// Shared reports whether the pool runs sessions in shared supervisors.
func (p *Pool) Shared() bool { return p.cfg.Shared }

// argv is the supervisor command of the next start.
func (p *Pool) argv() []string {
	if p.cfg.ArgvFunc != nil {
		return p.cfg.ArgvFunc()
	}
	return p.cfg.Argv
}

func (p *Pool) warn(msg string, args ...any) {
	if p.cfg.Warn != nil {
		p.cfg.Warn(msg, args...)
	}
}

// Start starts spec under a supervisor: in the current shared supervisor
// when sessions share them (and spec does not ask for a supervisor of its
// own), else in the warm spare when there is one, else in a new process.
// A new spare is started in the background for the next call. An error
// from a shared supervisor that died with the session committed is returned as is
// (ErrSharedDied: the command may have started); a shared supervisor gone before it took
// the session is retired and the start tried once more.
func (p *Pool) Start(spec proto.Spec) (*proto.Handle, error) { return p.StartWithin(spec, 0) }

// StartWithin is Start for a caller that waits at most d (0: no bound of
// its own) for the start: a shared supervisor that is up (it has reported a
// start before) is given d to report, at least minCallerReport and at most
// commitTimeout, since an answer takes it milliseconds and one that gives
// none in that time is stopped, wedged or starved; a supervisor process
// that is still starting is given commitTimeout, as a process start takes
// seconds on a loaded machine. The wait for a start-up slot (MaxStarting)
// is bounded by d too. A start that did not report in time did not happen
// and will not (Spec.StartBy): its error wraps ErrReportTimeout.
func (p *Pool) StartWithin(spec proto.Spec, d time.Duration) (*proto.Handle, error) {
	within := commitTimeout
	if d > 0 {
		within = min(max(d, minCallerReport), commitTimeout)
	}
	// Bound concurrent supervisor start-ups: hundreds of Go processes
	// starting at once on a small machine starve each other past the
	// ready timeout.
	deadline := time.Now().Add(within)
	slotWait := time.Duration(0) // as long as it takes
	if d > 0 {
		slotWait = within
	}
	if err := p.slot(slotWait); err != nil {
		return nil, err
	}
	defer func() { <-p.starting }()
	if d > 0 {
		// The wait for the slot counts.
		within = max(time.Until(deadline), time.Second)
	}
	if p.cfg.Shared && !spec.NoCgroup {
		for attempt := 0; attempt < 2; attempt++ {
			h, err := p.currentShared()
			if IsResourceExhausted(err) {
				return nil, p.exhausted(err)
			}
			if err != nil {
				p.warn("start shared supervisor", "err", err)
				break
			}
			wait := commitTimeout
			if h.Up() {
				wait = within
			}
			hd, err := h.Commit(spec, wait)
			switch {
			case err == nil:
				p.started()
				if h.Started() >= p.cfg.RetireAfter {
					p.retireShared(h)
				}
				return hd, nil
			case IsResourceExhausted(err):
				// Out of descriptors: a shared supervisor that holds sessions may
				// have reached its own limit, and a fresh one can take
				// this one; a fresh shared supervisor that cannot, or a second
				// failure within the backoff, means the limit is not
				// the shared supervisor's: report it and start no more shared supervisors.
				if h.Started() <= 1 || p.backingOff() || attempt > 0 {
					return nil, p.exhausted(err)
				}
				p.warn("shared supervisor out of file descriptors; starting a new one", "pid", h.PID(), "err", err)
				p.retireShared(h)
				continue
			case errors.Is(err, ErrSharedGone):
				p.warn("shared supervisor gone; starting a new one", "pid", h.PID(), "err", err)
				p.retireShared(h)
				continue
			case errors.Is(err, ErrNeedsCgroup):
				// A supervisor of its own contains it without one.
			case errors.Is(err, ErrSharedDied):
				// Not again elsewhere: the command may have started
				// (spawn sweeps what meta.json names).
				p.warn("shared supervisor died; starting a new one", "pid", h.PID(), "err", err)
				p.retireShared(h)
				return nil, err
			default:
				return nil, err
			}
			break
		}
	}
	p.mu.Lock()
	sp := p.spare
	p.spare = nil
	p.mu.Unlock()
	// The next spare starts now, while this one commits: a started spare
	// is warm only once its runtime is up, which takes longer than a
	// commit, and back-to-back calls otherwise wait for it. (Where shared supervisors
	// run the sessions, a single supervisor is the exception: no spare.)
	if !p.cfg.Shared {
		p.refillSpare()
		defer p.refillSpare()
	}
	if sp != nil {
		h, err := sp.Commit(spec, commitTimeout)
		if err == nil || !errors.Is(err, ErrGone) && !errors.Is(err, ErrNoReport) {
			return p.result(h, err)
		}
		p.warn("spare supervisor unusable; starting a new one", "err", err)
	}
	return p.result(Launch(p.argv(), p.cfg.Home, spec, p.cfg.Env, commitTimeout))
}

// minCallerReport is the least a caller's bound gives a shared supervisor
// that is up to report a start (StartWithin).
const minCallerReport = 3 * time.Second

// slot takes a start-up slot, waiting at most d (0: as long as it takes).
func (p *Pool) slot(d time.Duration) error {
	select {
	case p.starting <- struct{}{}:
		return nil
	default:
	}
	if d <= 0 {
		p.starting <- struct{}{}
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case p.starting <- struct{}{}:
		return nil
	case <-t.C:
		return fmt.Errorf("%w: %d supervisor starts ahead of this one did not finish within %v (a shared supervisor stopped, wedged or starved), and the command was not started", ErrReportTimeout, cap(p.starting), d)
	}
}

// result is what Start returns for a single supervisor's start.
func (p *Pool) result(h *proto.Handle, err error) (*proto.Handle, error) {
	switch {
	case err == nil:
		p.started()
	case IsResourceExhausted(err):
		err = p.exhausted(err)
	}
	return h, err
}

// currentShared returns the shared supervisor taking new sessions, starting
// one when there is none.
func (p *Pool) currentShared() (*Shared, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	if p.shared == nil {
		if time.Now().Before(p.exhaustedUntil) {
			// A fresh shared supervisor (or the engine) ran out of descriptors a
			// moment ago: a new one would too. Starts wait out the
			// backoff.
			return nil, fmt.Errorf("%w: a shared supervisor ran out of file descriptors less than %v ago", ErrResourceExhausted, p.exhaustedBackoff)
		}
		h, err := StartShared(p.argv(), p.cfg.Home, p.cfg.Env)
		if err != nil {
			return nil, err
		}
		p.sharedStarted.Add(1)
		p.shared = h
		if p.cfg.SharedExited != nil {
			go func() {
				<-h.Exited()
				p.cfg.SharedExited(h)
			}()
		}
	}
	return p.shared, nil
}

// retireShared stops h from taking sessions (it exits once its own have
// ended); the next Start starts a new shared supervisor.
func (p *Pool) retireShared(h *Shared) {
	h.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shared == h {
		p.shared = nil
	}
	// Forget retired shared supervisors that have exited.
	live := p.retired[:0]
	for _, r := range p.retired {
		select {
		case <-r.Exited():
		default:
			live = append(live, r)
		}
	}
	p.retired = append(live, h)
}

// refillSpare starts a spare supervisor in the background if none waits.
func (p *Pool) refillSpare() {
	p.mu.Lock()
	if p.closed || p.spare != nil || p.refilling {
		p.mu.Unlock()
		return
	}
	p.refilling = true
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		sp, err := StartSpare(p.argv(), p.cfg.Home, p.cfg.Env)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.refilling = false
		if err != nil {
			p.warn("start spare supervisor", "err", err)
			return
		}
		if p.closed || p.spare != nil {
			sp.Close()
			return
		}
		p.spare = sp
	}()
}

// Close stops the pool taking sessions into shared supervisors or keeping spares: the
// spare exits unused, and every shared supervisor exits once its sessions have ended
// (sessions are never killed by Close). Start still works after Close,
// each session in a supervisor of its own. Close returns at once; Wait
// waits for a spare still starting, WaitShared for the shared supervisors.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if p.spare != nil {
		p.spare.Close()
		p.spare = nil
	}
	for _, h := range append(p.retired, p.shared) {
		if h != nil {
			h.Close()
			p.closing = append(p.closing, h)
		}
	}
	p.shared, p.retired = nil, nil
}

// Wait waits for the pool's own goroutines: a spare being started (which
// exits unused if the pool closed meanwhile).
func (p *Pool) Wait() { p.wg.Wait() }

// WaitShared waits up to d, all told, for the shared supervisors that Close closed to
// exit, and reports whether they all did.
func (p *Pool) WaitShared(d time.Duration) bool {
	p.mu.Lock()
	hosts := append([]*Shared(nil), p.closing...)
	p.mu.Unlock()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for _, h := range hosts {
		select {
		case <-h.Exited():
		case <-deadline.C:
			return false
		}
	}
	return true
}
