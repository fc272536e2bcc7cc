package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

// firstYieldMs is the yieldMs of the measured first call.
const firstYieldMs = 500

// firstStep is step 5: the first exec of a fresh engine against its
// yieldMs, while the login-shell PATH probe may still run.
type firstStep struct {
	YieldMs int           `json:"yieldMs"`
	Command string        `json:"command"`
	Series  []firstSeries `json:"series"`
	// Before: the same series against -baseline-conch, when given.
	Before []firstSeries `json:"before,omitempty"`
}

type firstSeries struct {
	Name string `json:"name"`
	// Probe: `<shell> -l -c 'env -0'` alone, with the same HOME and SHELL
	// (what the probe costs).
	Probe benchkit.Latency `json:"probe"`
	// First: the first exec of `conch mcp` on a fresh home, timed from
	// the call to its result (the engine was started just before).
	First benchkit.Latency `json:"first"`
	// Again: the first exec of a second `conch mcp` on the same home
	// (whose cache may answer for the probe).
	Again benchkit.Latency `json:"again"`
	// Within: first calls that answered within yieldMs; Warned: first
	// calls whose text said the login PATH was not known yet.
	Within  int       `json:"withinYield"`
	Warned  int       `json:"warned"`
	ProbeMs []float64 `json:"probeMs"`
	FirstMs []float64 `json:"firstMs"`
	AgainMs []float64 `json:"againMs"`
}

// firstCall measures two set-ups: this machine's own login shell (HOME
// and SHELL as agentbench got them), and a simulated slow one: /bin/sh
// with a HOME whose .profile sleeps -slow-profile.
func (r *run) firstCall() *firstStep {
	st := &firstStep{YieldMs: firstYieldMs, Command: "true"}
	if r.o.baseline != "" {
		st.Before = r.firstRuns(r.o.baseline)
	}
	st.Series = r.firstRuns(r.o.conch)
	return st
}

// firstRuns measures both set-ups against bin.
func (r *run) firstRuns(bin string) []firstSeries {
	var out []firstSeries
	shell := os.Getenv("SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	out = append(out, r.firstSeries(bin, fmt.Sprintf("this machine's login shell (%s)", shell), nil, shell))

	fake, err := os.MkdirTemp("", "agentbench-home-")
	if err != nil {
		r.fail("first call: %v", err)
		return out
	}
	defer os.RemoveAll(fake)
	profile := fmt.Sprintf("sleep %.3f\n", r.o.slowProfile.Seconds())
	if err := os.WriteFile(filepath.Join(fake, ".profile"), []byte(profile), 0o644); err != nil {
		r.fail("first call: %v", err)
		return out
	}
	env := []string{"HOME=" + fake, "SHELL=/bin/sh"}
	return append(out, r.firstSeries(bin, fmt.Sprintf("slow profile: /bin/sh, .profile sleeps %v", r.o.slowProfile), env, "/bin/sh"))
}

func (r *run) firstSeries(bin, name string, env []string, shell string) firstSeries {
	s := firstSeries{Name: name}
	var probe, first, again []time.Duration
	for i := 0; i < r.o.firstN && r.ctx.Err() == nil; i++ {
		// The probe alone, as conch runs it.
		cmd := exec.CommandContext(r.ctx, shell, "-l", "-c", "env -0")
		cmd.Env = append(os.Environ(), env...)
		cmd.Dir = "/"
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			r.note("%s: the probe alone failed: %v", name, err)
		}
		probe = append(probe, time.Since(t0))

		d, warned, home, ok := r.firstExec(bin, name, env, "")
		if ok {
			first = append(first, d)
			if d <= firstYieldMs*time.Millisecond {
				s.Within++
			}
			if warned {
				s.Warned++
			}
			// A second engine on the same home (the first one stayed
			// until its probe had finished).
			if d, _, _, ok := r.firstExec(bin, name, env, home); ok {
				again = append(again, d)
			}
		}
		os.RemoveAll(home)
	}
	s.Probe, s.First, s.Again = benchkit.Summarize(probe), benchkit.Summarize(first), benchkit.Summarize(again)
	s.ProbeMs, s.FirstMs, s.AgainMs = msList(probe), msList(first), msList(again)
	return s
}

// firstExec starts bin's conch mcp (on home, else a fresh one that it returns),
// times its first exec and, for the second engine, lets it finish its
// probe before it goes. warned is whether the text said the login PATH
// was not known yet.
func (r *run) firstExec(bin, name string, env []string, home string) (time.Duration, bool, string, bool) {
	keep := home
	if keep == "" {
		var err error
		if keep, err = os.MkdirTemp("", "agentbench-first-"); err != nil {
			r.fail("%s: %v", name, err)
			return 0, false, "", false
		}
		if err := os.WriteFile(filepath.Join(keep, "config.json"), []byte(`{"quotas":{"execPerSecond":0}}`+"\n"), 0o600); err != nil {
			r.fail("%s: %v", name, err)
			return 0, false, "", false
		}
	}
	srv, err := benchkit.StartServer(r.ctx, bin, benchkit.ServerOptions{Name: "agentbench", Env: env, Home: keep, StripNotices: true})
	if err != nil {
		r.fail("%s: %v", name, err)
		return 0, false, keep, false
	}
	defer srv.Close()
	t0 := time.Now()
	res, err := srv.Call(r.ctx, 60*time.Second, "exec", map[string]any{"command": "true", "yieldMs": firstYieldMs})
	d := time.Since(t0)
	if err == nil {
		err = res.Completed("first exec")
	}
	if err != nil {
		r.fail("%s: %v", name, err)
		return 0, false, keep, false
	}
	warned := strings.Contains(res.Text, "login-shell PATH is not known yet")
	if warned {
		// The probe still runs: stay until it has written its cache
		// (stopping the engine would stop the probe).
		cache := filepath.Join(keep, "state", "login-path.json")
		deadline := time.Now().Add(r.o.slowProfile + 30*time.Second)
		for time.Now().Before(deadline) && r.ctx.Err() == nil {
			if _, err := os.Stat(cache); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return d, warned, keep, true
}

func msList(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = benchkit.Ms(d)
	}
	return out
}

func printFirst(w io.Writer, s *firstStep) {
	lat := func(name string, l benchkit.Latency) {
		fmt.Fprintf(w, "  %-38s %4d %8.1f %8.1f %8.1f %8.1f %8.1f\n", name, l.N, l.MedianMs, l.P90Ms, l.P99Ms, l.MinMs, l.MaxMs)
	}
	fmt.Fprintf(w, "5. First exec of a fresh engine: exec {command:%q, yieldMs:%d}, call to result (ms)\n", s.Command, s.YieldMs)
	fmt.Fprintf(w, "  %-38s %4s %8s %8s %8s %8s %8s\n", "", "n", "p50", "p90", "p99", "min", "max")
	show := func(label string, series []firstSeries) {
		for _, x := range series {
			fmt.Fprintf(w, "  %s%s\n", label, x.Name)
			lat("the login-shell probe alone", x.Probe)
			lat("first exec, fresh home", x.First)
			lat("first exec, second engine, same home", x.Again)
			fmt.Fprintf(w, "  first exec within yieldMs: %d/%d (%s); ran without the login PATH (warned): %d\n",
				x.Within, x.First.N, goal(x.Within == x.First.N), x.Warned)
		}
	}
	if len(s.Before) > 0 {
		show("before (-baseline-conch): ", s.Before)
		show("after: ", s.Series)
	} else {
		show("", s.Series)
	}
	fmt.Fprintln(w)
}
