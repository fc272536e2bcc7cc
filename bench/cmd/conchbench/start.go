package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

// goalStartRatio: conch-shim's start CPU ÷ a hello-world Go program's.
const goalStartRatio = 3.0

// startCost is the CPU (user + system, from the child's rusage) and wall
// time of one start of each program, interleaved: the hello-world Go
// baseline, conch-shim (the program every command runs under) and the
// full conch.
type startCost struct {
	N         int          `json:"n"`
	Hello     startSample  `json:"hello"`
	Shim      *startSample `json:"shim,omitempty"`
	Conch     startSample  `json:"conchVersion"`
	ShimRatio float64      `json:"shimCPURatio,omitempty"`
	ConchRat  float64      `json:"conchCPURatio"`
	GoalRatio float64      `json:"goalRatio"`
	GoalMet   bool         `json:"goalMet"`
	Skipped   []string     `json:"skipped,omitempty"`
	// MaxRSSKiB is each program's peak RSS from its rusage. Go starts a
	// child with vfork, so the figure is at least the parent's (this
	// benchmark's) RSS: read it only for programs larger than that.
	MaxRSSKiB map[string]int `json:"maxRSSKiB"`
}

type startSample struct {
	Argv        []string         `json:"argv"`
	CPUMedianMs float64          `json:"cpuMedianMs"`
	Wall        benchkit.Latency `json:"wall"`
}

// shimPath is conch-shim beside the conch binary, or "".
func shimPath(conch string) string {
	p := filepath.Join(filepath.Dir(conch), "conch-shim")
	if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
		return p
	}
	return ""
}

func (r *run) startCost() *startCost {
	o := r.o
	progress("start: %d starts of each program", o.n)
	sc := &startCost{N: o.n, GoalRatio: goalStartRatio, MaxRSSKiB: map[string]int{}}
	type prog struct {
		name string
		argv []string
		cpu  []time.Duration
		wall []time.Duration
		rss  int
	}
	progs := []*prog{{name: "conch", argv: []string{o.conch, "version"}}}
	if o.hello != "" {
		progs = append(progs, &prog{name: "hello", argv: []string{o.hello}})
	} else {
		sc.Skipped = append(sc.Skipped, "hello: no -hello binary (bench/run.sh builds bench/cmd/hello)")
	}
	if p := shimPath(o.conch); p != "" {
		out, _ := exec.Command(p, "handshake", "0").Output()
		proto := strings.TrimPrefix(strings.TrimSpace(string(out)), "conch-shim protocol ")
		progs = append(progs, &prog{name: "shim", argv: []string{p, "handshake", proto}})
	} else {
		sc.Skipped = append(sc.Skipped, "conch-shim: none beside "+o.conch)
	}
	for i := range o.warmup + o.n {
		for _, p := range progs {
			cmd := exec.CommandContext(r.ctx, p.argv[0], p.argv[1:]...)
			t0 := time.Now()
			err := cmd.Run()
			d := time.Since(t0)
			if err != nil {
				r.fail("start: %s: %v", strings.Join(p.argv, " "), err)
				return nil
			}
			if i < o.warmup {
				continue
			}
			ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			if ru != nil {
				p.cpu = append(p.cpu, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
				p.rss = max(p.rss, int(ru.Maxrss))
			}
			p.wall = append(p.wall, d)
		}
	}
	sample := func(p *prog) startSample {
		return startSample{Argv: p.argv, CPUMedianMs: medianMs(p.cpu), Wall: benchkit.Summarize(p.wall)}
	}
	for _, p := range progs {
		sc.MaxRSSKiB[p.name] = p.rss
		s := sample(p)
		switch p.name {
		case "hello":
			sc.Hello = s
		case "shim":
			sc.Shim = &s
		case "conch":
			sc.Conch = s
		}
	}
	sc.ConchRat = benchkit.Ratio(sc.Conch.CPUMedianMs, sc.Hello.CPUMedianMs)
	if sc.Shim != nil {
		sc.ShimRatio = benchkit.Ratio(sc.Shim.CPUMedianMs, sc.Hello.CPUMedianMs)
		sc.GoalMet = sc.ShimRatio <= goalStartRatio
	}
	return sc
}

func medianMs(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}

func printStart(w io.Writer, sc *startCost) {
	fmt.Fprintf(w, "\n0. Start-up: CPU (user+sys, rusage) and wall time of one start (N=%d each, interleaved)\n", sc.N)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tCPU median\twall median\twall p90\t\n")
	row := func(name string, s startSample) {
		fmt.Fprintf(tw, "%s\t%.2f ms\t%.2f ms\t%.2f ms\t\n", name, s.CPUMedianMs, s.Wall.MedianMs, s.Wall.P90Ms)
	}
	row("   hello-world Go program", sc.Hello)
	if sc.Shim != nil {
		row("   conch-shim handshake", *sc.Shim)
	}
	row("   conch version", sc.Conch)
	tw.Flush()
	if sc.Shim != nil {
		fmt.Fprintf(w, "   CPU ratio, conch-shim ÷ hello: %.2fx  (goal ≤ %.0fx: %s)\n", sc.ShimRatio, sc.GoalRatio, goal(sc.GoalMet))
	}
	fmt.Fprintf(w, "   CPU ratio, conch ÷ hello:      %.2fx\n", sc.ConchRat)
	for _, s := range sc.Skipped {
		fmt.Fprintf(w, "   skipped %s\n", s)
	}
}

// goalParallelSeconds: 50 × sleep 1 at once, all answered within 1.1 s.
const goalParallelSeconds = 1.1

// parallel is W4: 50 exec calls of `sleep 1` in flight at once, each in
// the foreground; the figure is the wall time from the first call to the
// last answer.
type parallel struct {
	Calls   int     `json:"calls"`
	Reps    int     `json:"reps"`
	Seconds float64 `json:"medianSeconds"`
	All     []float64
	Goal    float64 `json:"goalSeconds"`
	GoalMet bool    `json:"goalMet"`
}

func (r *run) parallel() *parallel {
	const calls = 50
	progress("parallel: %d × exec sleep 1 at once, %d times", calls, r.o.reps)
	s, err := benchkit.StartServer(r.ctx, r.o.conch, benchkit.ServerOptions{Name: "conchbench-par",
		Config: `{"quotas":{"execPerSecond":0,"maxRunning":200},"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`})
	if err != nil {
		r.fail("parallel: %v", err)
		return nil
	}
	defer s.Close()
	if err := r.warm(s); err != nil {
		r.fail("parallel: %v", err)
		return nil
	}
	pr := &parallel{Calls: calls, Reps: r.o.reps, Goal: goalParallelSeconds}
	for range r.o.reps {
		var wg sync.WaitGroup
		errs := make(chan error, calls)
		t0 := time.Now()
		for range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.Call(r.ctx, callLimit, "exec", map[string]any{"command": "sleep 1"})
				if err == nil {
					err = res.Completed("exec sleep 1")
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		pr.All = append(pr.All, time.Since(t0).Seconds())
		close(errs)
		for err := range errs {
			r.fail("parallel: %v", err)
			return nil
		}
	}
	sorted := append([]float64(nil), pr.All...)
	sort.Float64s(sorted)
	pr.Seconds = sorted[len(sorted)/2]
	pr.GoalMet = pr.Seconds <= goalParallelSeconds
	return pr
}

func printParallel(w io.Writer, pr *parallel) {
	fmt.Fprintf(w, "\n6. Parallel: %d × exec {command:\"sleep 1\"} at once on the gateway host (%d times)\n", pr.Calls, pr.Reps)
	fmt.Fprintf(w, "   all answered after %.2f s (median; runs %v)  (goal ≤ %.1f s: %s)\n", pr.Seconds, pr.All, pr.Goal, goal(pr.GoalMet))
}
