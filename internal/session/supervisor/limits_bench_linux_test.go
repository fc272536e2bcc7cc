package supervisor

import (
	"fmt"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"os"
	"slices"
	"testing"
	"time"
)

// BenchmarkSharedTrueLimits runs `sh -c true` (no output, ends at once) on
// one shared supervisor, from Commit to the final end state, with the
// default session limits (a v1 memory and pids cgroup each here) and
// without, in turns, and reports each median and their ratio (limits ÷
// none) measured in the same run. Each call follows a quiet 20 ms, as an
// agent's calls do: work the kernel defers (an RCU grace period) is paid
// by the first call after a pause, never by back-to-back ones.
//
//	go test ./internal/session/supervisor -run '^$' -bench SharedTrueLimits -benchtime 200x
func BenchmarkSharedTrueLimits(b *testing.B) {
	if !CgroupAvailable() {
		b.Skip("no session cgroups here")
	}
	lim := &proto.Limits{MemoryBytes: 1 << 30, Pids: 4096}
	if enforced, warns := ProbeLimits((&proto.Spec{Limits: lim}).LimitList()); len(enforced) < 2 {
		b.Skipf("the session limits cannot be enforced here: %v", warns)
	}
	home := b.TempDir()
	h, err := StartShared([]string{os.Args[0], "supervise"}, home, []string{"PATH=" + os.Getenv("PATH")})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		h.Close()
		<-h.Exited()
	}()
	run := func(id string, lim *proto.Limits) time.Duration {
		spec := sharedSpec(home, proto.Spec{ID: id, Argv: []string{"/bin/sh", "-c", "true"}, Limits: lim})
		time.Sleep(20 * time.Millisecond)
		t0 := time.Now()
		hd, err := h.Commit(spec, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		var ex *proto.Exit
		for ev := range hd.Events {
			if ev.Exit != nil && ev.Exit.Final {
				ex = ev.Exit
				break
			}
		}
		d := time.Since(t0)
		if ex == nil || ex.State != proto.StateExited {
			b.Fatalf("end %+v", ex)
		}
		for range hd.Events {
		}
		hd.Release()
		os.RemoveAll(proto.SessionDir(home, spec.ID))
		return d
	}
	var on, off []time.Duration
	for i := 0; i < 5; i++ { // warm-up
		run(fmt.Sprintf("w%d", 2*i), lim)
		run(fmt.Sprintf("w%d", 2*i+1), nil)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		on = append(on, run(fmt.Sprintf("b%d", 2*i), lim))
		off = append(off, run(fmt.Sprintf("b%d", 2*i+1), nil))
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / 1e6
	}
	mOn, mOff := med(on), med(off)
	b.ReportMetric(mOn, "limits-ms")
	b.ReportMetric(mOff, "none-ms")
	b.ReportMetric(mOn/mOff, "limits/none")
}
