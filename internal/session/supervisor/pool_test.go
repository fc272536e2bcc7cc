//go:build unix

package supervisor

import (
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The pool's tests start real supervisors: the test binary re-executed as
// `supervise` (TestMain), as the engine starts `conch supervise`.

// poolDeadline bounds every wait in these tests: generous, for a loaded
// two-core machine.
const poolDeadline = 30 * time.Second

type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) warn(msg string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.msgs)
}

// newPool makes a pool on a fresh home that is closed, and waited for,
// when the test ends.
func newPool(t *testing.T, shared bool, retireAfter int, hostExited func(*Shared)) (*Pool, string, *warnings) {
	t.Helper()
	if shared && !CgroupAvailable() {
		t.Skip("a shared supervisor needs session cgroups, and none can be created here (no writable cgroup v2, v1 pids or freezer)")
	}
	home := t.TempDir()
	w := &warnings{}
	p := NewPool(PoolConfig{
		Argv: []string{os.Args[0], "supervise"}, Home: home, Env: []string{"PATH=" + os.Getenv("PATH")},
		Shared: shared, MaxStarting: 2, RetireAfter: retireAfter, SharedExited: hostExited, Warn: w.warn,
	})
	t.Cleanup(func() {
		p.Close()
		p.Wait()
		if !p.WaitShared(poolDeadline) {
			t.Errorf("the pool's hosts did not exit after Close with no session left")
		}
	})
	return p, home, w
}

func poolSpec(home string, argv ...string) proto.Spec {
	counter++ // callers are not concurrent
	id := fmt.Sprintf("p%d", counter)
	return testDefaults(home, proto.Spec{ID: id, Argv: argv, Socket: filepath.Join(home, id+".sock")})
}

// waitFor polls cond until it holds, failing the test after poolDeadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(poolDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", poolDeadline, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spare returns the pool's waiting spare, waiting for one to be ready.
func waitSpare(t *testing.T, p *Pool) *Spare {
	t.Helper()
	var sp *Spare
	waitFor(t, "a spare supervisor waits", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		sp = p.spare
		return sp != nil
	})
	return sp
}

func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// runs starts spec in the pool and checks that the command ran to exit 0.
func runs(t *testing.T, p *Pool, spec proto.Spec) *proto.Handle {
	t.Helper()
	hd, err := p.Start(spec)
	if err != nil {
		t.Fatalf("start %s: %v", spec.ID, err)
	}
	if ex := final(t, hd, poolDeadline); ex.ExitCode == nil || *ex.ExitCode != 0 {
		t.Fatalf("session %s ended %+v", spec.ID, ex)
	}
	return hd
}

// TestPoolSpareReuse: without shared supervisors the pool keeps one warm spare,
// a start runs in it (its start-up already paid), and a new spare is
// ready for the next start.
func TestPoolSpareReuse(t *testing.T) {
	p, home, w := newPool(t, false, 0, nil)
	if p.Shared() {
		t.Fatal("a pool made without shared hosts says it has them")
	}
	for i := 0; i < 3; i++ {
		sp := waitSpare(t, p)
		hd := runs(t, p, poolSpec(home, "/bin/sh", "-c", "echo spare"))
		if hd.SupervisorPID != sp.cmd.Process.Pid {
			t.Fatalf("start %d ran in supervisor %d, not in the waiting spare %d", i, hd.SupervisorPID, sp.cmd.Process.Pid)
		}
		if next := waitSpare(t, p); next == sp {
			t.Fatalf("start %d: the used spare is offered again", i)
		}
	}
	if n := w.count(); n != 0 {
		t.Errorf("warnings from a pool that met no failure: %v", w.msgs)
	}
}

// TestPoolDeadSpare: a spare that died while waiting is not the end of a
// start: the pool says so and starts a supervisor of the session's own.
func TestPoolDeadSpare(t *testing.T) {
	p, home, w := newPool(t, false, 0, nil)
	sp := waitSpare(t, p)
	pid := sp.cmd.Process.Pid
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, "the killed spare is gone", func() bool { return processGone(pid) })
	hd := runs(t, p, poolSpec(home, "/bin/sh", "-c", "echo fresh"))
	if hd.SupervisorPID == pid {
		t.Fatalf("the session ran in the killed spare %d", pid)
	}
	if w.count() == 0 {
		t.Error("an unusable spare was replaced without a warning")
	}
}

// TestPoolCloseSpare: Close makes the waiting spare exit unused; a start
// after Close still runs, in a supervisor of its own, and leaves no spare.
func TestPoolCloseSpare(t *testing.T) {
	p, home, _ := newPool(t, false, 0, nil)
	pid := waitSpare(t, p).cmd.Process.Pid
	p.Close()
	waitFor(t, "the spare exits after Close", func() bool { return processGone(pid) })
	runs(t, p, poolSpec(home, "/bin/sh", "-c", "echo after"))
	p.Wait()
	p.mu.Lock()
	left := p.spare
	p.mu.Unlock()
	if left != nil {
		t.Error("a closed pool started a spare")
	}
}

// TestPoolSharedRetirement: with shared supervisors, sessions go to the current
// shared supervisor until it has taken RetireAfter of them; then it is retired (and
// exits once idle, SharedExited hearing of it) and a new shared supervisor takes the
// next session.
func TestPoolSharedRetirement(t *testing.T) {
	exited := make(chan int, 4)
	p, home, w := newPool(t, true, 2, func(h *Shared) { exited <- h.PID() })
	if !p.Shared() {
		t.Fatal("a pool made with shared hosts says it has none")
	}
	a := runs(t, p, poolSpec(home, "true")).SupervisorPID
	if b := runs(t, p, poolSpec(home, "true")).SupervisorPID; b != a {
		t.Fatalf("the second session went to host %d, not to the current host %d", b, a)
	}
	c := runs(t, p, poolSpec(home, "true")).SupervisorPID
	if c == a {
		t.Fatalf("host %d took a session past its retirement", a)
	}
	select {
	case pid := <-exited:
		if pid != a {
			t.Fatalf("HostExited heard of host %d, want the retired %d", pid, a)
		}
	case <-time.After(poolDeadline):
		t.Fatalf("the retired host %d did not exit (or HostExited was not called)", a)
	}
	if w.count() != 0 {
		t.Errorf("warnings from a pool that met no failure: %v", w.msgs)
	}
}

// TestPoolSharedGone: a shared supervisor that died between sessions is retired, and the
// start that found it gone goes to a new shared supervisor.
func TestPoolSharedGone(t *testing.T) {
	exited := make(chan int, 4)
	p, home, w := newPool(t, true, 0, func(h *Shared) { exited <- h.PID() })
	a := runs(t, p, poolSpec(home, "true")).SupervisorPID
	syscall.Kill(a, syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(poolDeadline):
		t.Fatalf("killed host %d: HostExited not called", a)
	}
	b := runs(t, p, poolSpec(home, "true")).SupervisorPID
	if b == a {
		t.Fatalf("a session went to the dead host %d", a)
	}
	p.mu.Lock()
	current := p.shared
	p.mu.Unlock()
	if current == nil || current.PID() != b {
		t.Fatalf("the session after the host's death ran in supervisor %d, not in a new host", b)
	}
	if w.count() == 0 {
		t.Error("a dead host was replaced without a warning")
	}
}

// TestPoolCloseShared: Close kills nothing: a running session in a shared supervisor
// goes on, the shared supervisor takes no more sessions (a start after Close runs in a
// supervisor of its own), and the shared supervisor exits once its session has ended.
// A session asking for no cgroup never goes to a shared supervisor.
func TestPoolCloseShared(t *testing.T) {
	p, home, _ := newPool(t, true, 0, nil)
	noCg := poolSpec(home, "true")
	noCg.NoCgroup = true
	own := runs(t, p, noCg).SupervisorPID

	spec := poolSpec(home, "/bin/sh", "-c", "read line; echo got $line")
	spec.Stdin = "open"
	hd, err := p.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	host := hd.SupervisorPID
	if host == own {
		t.Fatalf("the session without a cgroup ran in host %d", host)
	}
	p.Close()
	after := runs(t, p, poolSpec(home, "true")).SupervisorPID
	if after == host {
		t.Fatal("a closed pool gave a session to its host")
	}
	if p.WaitShared(200 * time.Millisecond) {
		t.Fatal("the host exited after Close while its session ran")
	}
	if _, err := Call(hd.Socket, proto.Request{Op: "write", Session: spec.ID, Data: []byte("in\n")}); err != nil {
		t.Fatalf("the session's host stopped serving after Close: %v", err)
	}
	if ex := final(t, hd, poolDeadline); ex.ExitCode == nil || *ex.ExitCode != 0 {
		t.Fatalf("the session ended %+v after Close", ex)
	}
	if !p.WaitShared(poolDeadline) {
		t.Fatal("the closed host did not exit once its session ended")
	}
}

// TestPoolConcurrentStarts: many starts at once, in both modes, each get
// a supervisor and run to their end (MaxStarting bounds how many start
// together; -race checks the pool's state).
func TestPoolConcurrentStarts(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			p, home, _ := newPool(t, shared, 3, nil)
			const n = 12
			specs := make([]proto.Spec, n)
			for i := range specs {
				specs[i] = poolSpec(home, "/bin/sh", "-c", fmt.Sprintf("echo run-%d", i))
			}
			errs := make(chan error, n)
			for _, spec := range specs {
				go func() {
					hd, err := p.Start(spec)
					if err != nil {
						errs <- fmt.Errorf("start %s: %w", spec.ID, err)
						return
					}
					defer hd.Close()
					for ev := range hd.Events {
						if ev.Exit != nil {
							if ev.Exit.ExitCode == nil || *ev.Exit.ExitCode != 0 {
								errs <- fmt.Errorf("session %s ended %+v", spec.ID, ev.Exit)
								return
							}
							errs <- nil
							return
						}
					}
					errs <- fmt.Errorf("session %s: events closed without an end state", spec.ID)
				}()
			}
			timeout := time.After(poolDeadline)
			for range specs {
				select {
				case err := <-errs:
					if err != nil {
						t.Error(err)
					}
				case <-timeout:
					t.Fatalf("not every session ended within %v", poolDeadline)
				}
			}
		})
	}
}
