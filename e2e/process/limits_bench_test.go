package process

import (
	"sort"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// BenchmarkExecSessionLimits times `exec true` on the gateway with the
// default session limits (memory and pids), with a CPU weight too, and
// with every limit off: three engines side by side, one round trip of
// each per iteration, in turns, so that the load of the machine weighs on
// all three alike. It reports each median and its ratio to "off":
//
//	go test ./e2e/process -run '^$' -bench ExecSessionLimits -benchtime 300x
func BenchmarkExecSessionLimits(b *testing.B) {
	base := `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}`
	confs := []struct{ name, conf string }{
		{"off", base + `,"quotas":{"session":{"memoryBytes":0,"pids":0,"cpuWeight":0}}}`},
		{"defaults", base + `}`},
		{"cpuWeight", base + `,"quotas":{"session":{"cpuWeight":100}}}`},
	}
	var engines []*e2etest.Conch
	for _, c := range confs {
		engines = append(engines, e2etest.StartConch(b, e2etest.NewHome(b, c.conf)))
	}
	times := make([][]time.Duration, len(engines))
	b.ResetTimer()
	for i := range b.N + 10 {
		for k := range engines {
			j := (k + i) % len(engines)
			start := time.Now()
			if r := engines[j].Exec(map[string]any{"command": "true"}); r.Str("status") != "completed" {
				b.Fatal(r.Text)
			}
			if i >= 10 {
				times[j] = append(times[j], time.Since(start))
			}
		}
	}
	b.StopTimer()
	med := make([]float64, len(times))
	for j, ts := range times {
		sort.Slice(ts, func(a, c int) bool { return ts[a] < ts[c] })
		med[j] = float64(ts[len(ts)/2]) / 1e6
		b.ReportMetric(med[j], confs[j].name+"-ms")
		if j > 0 {
			b.ReportMetric(med[j]/med[0], confs[j].name+"/off")
		}
	}
}
