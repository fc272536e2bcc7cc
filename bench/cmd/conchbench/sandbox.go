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
// median ÷ gateway exec "true" median; goalRawRatio: bwrap-sandboxed exec
// "true" ÷ os/exec spawning bwrap running the same shell.
const (
	goalSandboxRatio = 3.0
	goalRawRatio     = 1.5
)

// rawBwrap is the bare bubblewrap run the bwrap sandbox is compared with:
// the whole file system read-only, /dev and /proc, every namespace, and
// the login shell conch's sandboxed commands run under.
var rawBwrap = []string{"bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", "sh", "-lc", "true"}

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
	// Raw is os/exec spawning bwrap itself (rawBwrap), no conch: what
	// the bwrap sandbox costs at the least.
	Raw         *benchkit.Latency `json:"rawBwrap,omitempty"`
	RawArgv     []string          `json:"rawBwrapArgv,omitempty"`
	BwrapRawRat float64           `json:"bwrapRawMedianRatio,omitempty"`
	Skipped     []string          `json:"skipped,omitempty"`
	GoalRatio   float64           `json:"goalRatio"`
	GoalMet     bool              `json:"goalMet"`
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
	gw, err := benchkit.StartServer(r.ctx, o.conch, benchkit.ServerOptions{Name: "conchbench-gw", Config: `{"quotas":{"execPerSecond":0},"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`, Env: sameShell})
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
	var raw []time.Duration
	haveBwrap := false
	for _, h := range hosts {
		haveBwrap = haveBwrap || h.name == "bwrap"
	}
	for i := range o.warmup + o.n {
		if haveBwrap {
			t0 := time.Now()
			out, err := exec.CommandContext(r.ctx, rawBwrap[0], rawBwrap[1:]...).CombinedOutput()
			d := time.Since(t0)
			if err != nil {
				r.fail("sandbox: raw %v: %v %s", rawBwrap, err, out)
				return nil
			}
			if i >= o.warmup {
				raw = append(raw, d)
			}
		}
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
	if len(raw) > 0 {
		l := benchkit.Summarize(raw)
		so.Raw, so.RawArgv = &l, rawBwrap
	}
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
			if so.Raw != nil {
				so.BwrapRawRat = benchkit.Ratio(l.MedianMs, so.Raw.MedianMs)
				if so.BwrapRawRat > goalRawRatio {
					so.GoalMet = false
				}
			}
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
	if so.Raw != nil {
		row("   bwrap … sh -lc true (os/exec, no conch)", *so.Raw)
	}
	tw.Flush()
	if so.Bwrap != nil {
		fmt.Fprintf(w, "   median ratio, bwrap ÷ gateway:    %.2fx  (goal ≤ %.0fx)\n", so.BwrapRatio, so.GoalRatio)
	}
	if so.Landlock != nil {
		fmt.Fprintf(w, "   median ratio, landlock ÷ gateway: %.2fx  (goal ≤ %.0fx)\n", so.LandlockRatio, so.GoalRatio)
	}
	if so.Raw != nil {
		fmt.Fprintf(w, "   median ratio, bwrap ÷ raw bwrap:  %.2fx  (goal ≤ %.1fx)\n", so.BwrapRawRat, goalRawRatio)
	}
	for _, s := range so.Skipped {
		fmt.Fprintf(w, "   skipped %s\n", s)
	}
	fmt.Fprintf(w, "   goal: %s\n", goal(so.GoalMet))
}
