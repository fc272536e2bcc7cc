package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"text/tabwriter"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

// goalSandboxRatio is the sandbox overhead goal: sandboxed exec "true"
// median ÷ gateway exec "true" median (issue 7).
const goalSandboxRatio = 3.0

// sandboxOverhead compares exec "true" on host=sandbox (bwrap, and
// landlock where the kernel offers it) with exec "true" on the gateway,
// interleaved in the same run.
type sandboxOverhead struct {
	N             int               `json:"n"`
	Warmup        int               `json:"warmup"`
	Gateway       benchkit.Latency  `json:"gatewayTrue"`
	Bwrap         *benchkit.Latency `json:"bwrapTrue,omitempty"`
	BwrapRatio    float64           `json:"bwrapMedianRatio,omitempty"`
	Landlock      *benchkit.Latency `json:"landlockTrue,omitempty"`
	LandlockRatio float64           `json:"landlockMedianRatio,omitempty"`
	Skipped       []string          `json:"skipped,omitempty"`
	GoalRatio     float64           `json:"goalRatio"`
	GoalMet       bool              `json:"goalMet"`
}

func (r *run) sandboxOverhead() *sandboxOverhead {
	o := r.o
	progress("sandbox: %d warm-up + %d measured exec true calls per host", o.warmup, o.n)
	ws, err := os.MkdirTemp("", "conchbench-ws-")
	if err != nil {
		r.fail("sandbox: %v", err)
		return nil
	}
	defer os.RemoveAll(ws)
	type host struct {
		name string
		srv  *benchkit.Server
		d    []time.Duration
	}
	gw, err := benchkit.StartServer(r.ctx, o.conch, benchkit.ServerOptions{Name: "conchbench-gw", Config: `{"quotas":{"execPerSecond":0},"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`})
	if err != nil {
		r.fail("sandbox: gateway server: %v", err)
		return nil
	}
	defer gw.Close()
	hosts := []*host{{name: "gateway", srv: gw}}
	so := &sandboxOverhead{N: o.n, Warmup: o.warmup, GoalRatio: goalSandboxRatio}
	for _, backend := range []string{"bwrap", "landlock"} {
		if backend == "bwrap" {
			if _, err := exec.LookPath("bwrap"); err != nil {
				so.Skipped = append(so.Skipped, "bwrap: not installed")
				continue
			}
		}
		conf := fmt.Sprintf(`{"quotas":{"execPerSecond":0},"sandbox":{"mode":"all","backend":%q},"agents":{"main":{"workspace":%q}}}`, backend, ws)
		s, err := benchkit.StartServer(r.ctx, o.conch, benchkit.ServerOptions{Name: "conchbench-" + backend, Config: conf})
		if err != nil {
			r.fail("sandbox: %s server: %v", backend, err)
			continue
		}
		defer s.Close()
		res, err := s.Call(r.ctx, callLimit, "exec", map[string]any{"command": "true"})
		if err != nil || res.Completed("exec true") != nil {
			so.Skipped = append(so.Skipped, fmt.Sprintf("%s: unusable here (%v %s)", backend, err, benchkit.Clip(res.Text, 200)))
			continue
		}
		hosts = append(hosts, &host{name: backend, srv: s})
	}
	for i := range o.warmup + o.n {
		for _, h := range hosts {
			t0 := time.Now()
			res, err := h.srv.Call(r.ctx, callLimit, "exec", map[string]any{"command": "true"})
			d := time.Since(t0)
			if err == nil {
				err = res.Completed("exec true on " + h.name)
			}
			if err != nil {
				r.fail("sandbox: %v", err)
				return nil
			}
			if i >= o.warmup {
				h.d = append(h.d, d)
			}
		}
	}
	so.Gateway = benchkit.Summarize(hosts[0].d)
	so.GoalMet = true
	for _, h := range hosts[1:] {
		l := benchkit.Summarize(h.d)
		ratio := benchkit.Ratio(l.MedianMs, so.Gateway.MedianMs)
		if ratio > goalSandboxRatio {
			so.GoalMet = false
		}
		switch h.name {
		case "bwrap":
			so.Bwrap, so.BwrapRatio = &l, ratio
		case "landlock":
			so.Landlock, so.LandlockRatio = &l, ratio
		}
	}
	return so
}

func printSandbox(w io.Writer, so *sandboxOverhead) {
	fmt.Fprintf(w, "\n5. Sandbox overhead: exec {command:\"true\"} per host (N=%d each after %d warm-up, interleaved)\n", so.N, so.Warmup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tmedian\tp90\tp99\tmin\tmax\t\n")
	row := func(name string, l benchkit.Latency) {
		fmt.Fprintf(tw, "%s\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f ms\t\n", name, l.MedianMs, l.P90Ms, l.P99Ms, l.MinMs, l.MaxMs)
	}
	row("   host=gateway", so.Gateway)
	if so.Bwrap != nil {
		row("   host=sandbox, bwrap", *so.Bwrap)
	}
	if so.Landlock != nil {
		row("   host=sandbox, landlock", *so.Landlock)
	}
	tw.Flush()
	if so.Bwrap != nil {
		fmt.Fprintf(w, "   median ratio, bwrap ÷ gateway:    %.2fx  (goal ≤ %.0fx)\n", so.BwrapRatio, so.GoalRatio)
	}
	if so.Landlock != nil {
		fmt.Fprintf(w, "   median ratio, landlock ÷ gateway: %.2fx  (goal ≤ %.0fx)\n", so.LandlockRatio, so.GoalRatio)
	}
	for _, s := range so.Skipped {
		fmt.Fprintf(w, "   skipped %s\n", s)
	}
	fmt.Fprintf(w, "   goal: %s\n", goal(so.GoalMet))
}
