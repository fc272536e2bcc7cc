//go:build unix

package supervisor

import (
	"errors"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPoolFrozenShared freezes a shared supervisor for real (SIGSTOP) past
// the pool's ready timeout (shortened to what the test can wait for):
// the starts sent to it meanwhile fail as starts that did not happen, and
// when the shared supervisor runs again it does not start them (they ran and were
// killed "by shutdown"); a command of the shared supervisor that ended by itself
// during the freeze ends exited 0, not killed.
func TestPoolFrozenShared(t *testing.T) {
	old := commitTimeout
	commitTimeout = 2 * time.Second
	t.Cleanup(func() { commitTimeout = old })
	p, home, _ := newPool(t, true, 0, nil)
	gate := filepath.Join(t.TempDir(), "gate")
	a, err := p.Start(poolSpec(home, "/bin/sh", "-c", "until [ -e "+gate+" ]; do sleep 0.01; done; exit 0"))
	if err != nil {
		t.Fatal(err)
	}
	host := a.SupervisorPID
	if err := syscall.Kill(host, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { syscall.Kill(host, syscall.SIGCONT) }
	defer cont()
	// The command ends by itself while its shared supervisor is frozen.
	os.WriteFile(gate, nil, 0o600)
	waitFor(t, "the command to end", func() bool {
		b, err := os.ReadFile("/proc/" + itoa(a.PID) + "/stat")
		return err != nil || strings.Contains(string(b), ") Z ")
	})

	markers := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		spec := poolSpec(home, "/bin/sh", "-c", "touch "+filepath.Join(markers, itoa(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.Start(spec)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			// It went to a new shared supervisor after the frozen one was retired.
			continue
		}
		if !errors.Is(err, ErrSharedDied) || !errors.Is(err, ErrReportTimeout) || !strings.Contains(err.Error(), "not started") {
			t.Errorf("start %d: %v, want a start that did not happen (ErrHostDied)", i, err)
		}
	}
	cont()
	ex := final(t, a, poolDeadline)
	if ex.State != proto.StateExited || ex.ExitCode == nil || *ex.ExitCode != 0 || ex.KilledBy != nil {
		t.Errorf("the command that ended by itself during the freeze: %+v, want exited 0", ex)
	}
	// The frozen shared supervisor, running again, reads the specs it was sent: it
	// must not start them. It exits once its session has ended.
	waitFor(t, "the frozen host to exit", func() bool { return processGone(host) })
	for i, err := range errs {
		if _, serr := os.Stat(filepath.Join(markers, itoa(i))); serr == nil && err != nil {
			t.Errorf("start %d failed (%v), yet its command ran", i, err)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
