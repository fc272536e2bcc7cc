//go:build unix

package supervisor

import (
	"errors"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestFrozenSharedBoundedByCaller freezes a shared supervisor that is up
// (SIGSTOP) and checks every wait on it against its bound: a start with a
// caller's bound fails within it as a start that did not happen
// (ErrReportTimeout), and each control request fails within
// ReplyTimeout (a write: its own bound) with ErrNotResponding, not
// ErrUnreachable (the supervisor lives).
func TestFrozenSharedBoundedByCaller(t *testing.T) {
	p, home, _ := newPool(t, true, 0, nil)
	spec := poolSpec(home, "/bin/sh", "-c", "exec cat")
	a, err := p.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(a.SupervisorPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(a.SupervisorPID, syscall.SIGCONT)

	start := time.Now()
	_, err = p.StartWithin(poolSpec(home, "/bin/true"), 100*time.Millisecond)
	if took := time.Since(start); took > minCallerReport+2*time.Second {
		t.Errorf("a start bounded by its caller took %v on a frozen host", took)
	}
	if !errors.Is(err, ErrReportTimeout) {
		t.Errorf("start on a frozen host: %v, want ErrReportTimeout", err)
	}
	// All at once: each waits out its bound.
	ops := []string{"status", "write", "closeStdin", "kill", "screen", "meta", "trim"}
	errs := make([]error, len(ops))
	took := make([]time.Duration, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, errs[i] = Call(a.Socket, proto.Request{Op: op, Session: spec.ID, Data: []byte("x"), MaxBytes: 1})
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for i, op := range ops {
		if took[i] > replyTimeout(op)+2*time.Second {
			t.Errorf("%s took %v on a frozen host, want at most %v", op, took[i], replyTimeout(op))
		}
		if !errors.Is(errs[i], ErrNotResponding) || errors.Is(errs[i], ErrUnreachable) {
			t.Errorf("%s on a frozen host: %v, want ErrNotResponding", op, errs[i])
		}
	}
	start = time.Now()
	if _, err := CallWithin(a.Socket, proto.Request{Op: "status", Session: spec.ID}, 200*time.Millisecond); !errors.Is(err, ErrNotResponding) || time.Since(start) > 2*time.Second {
		t.Errorf("CallWithin 200ms: %v after %v", err, time.Since(start))
	}
}
