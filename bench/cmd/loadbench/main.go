// Command loadbench measures `conch serve` under many agents at once: it
// starts a gateway on a fresh temporary home on loopback, creates -agents
// agents through POST /v1/agents with the operator token, and has each keep
// -inflight short execs (`true`) in flight over POST /v1/exec for -duration.
// It reports throughput, latency percentiles, errors, 429 rate-limit answers
// (counted apart; Retry-After is honoured) and the sessions and supervisors
// left afterwards. In the same run it measures a baseline: Go's os/exec
// spawning `sh -c true` with as many workers as conch had execs in flight
// (agents × inflight, the "same number"), and reports the ratio of
// the throughputs; it also reports the ratio to the best baseline it found,
// with 2 × NumCPU workers. conch serve runs with SHELL=/bin/sh, so both
// sides run the same shell.
//
// Usage:
//
//	loadbench -conch PATH [-agents 50] [-inflight 20] [-duration 30s] [--json]
//
// bench/load.sh builds conch and loadbench and runs it; see bench/README.md.
// Exit status: 0 when conch behaved, 1 when an exec failed (any error other
// than 429), a session was left running or a supervisor outlived conch serve,
// 2 on bad usage or when the gateway could not be started. Speed is never
// asserted.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

// Hard bounds, whatever the flags say: the run stops by itself.
const (
	maxAgents      = 500
	maxInflight    = 200
	maxDuration    = 30 * time.Minute
	maxBaselineW   = 1000
	errorSamples   = 5
	sampleGap      = 250 * time.Millisecond
	settleAfterRun = 2 * time.Second
)

type options struct {
	conch           string
	agents          int
	inflight        int
	duration        time.Duration
	warmup          time.Duration
	requestTimeout  time.Duration
	maxExecs        int64
	baselineWorkers int
	command         string
	json            bool
}

// run is what one side (conch or the baseline) measured.
type run struct {
	Workers      int      `json:"workers"`
	WindowS      float64  `json:"windowS"` // measured window, after the warm-up
	OK           int64    `json:"ok"`      // successful execs completed in the window
	OKTotal      int64    `json:"okTotal"` // including warm-up and drain
	ExecPerS     float64  `json:"execPerS"`
	Latency      latency  `json:"latency"`
	Errors       int64    `json:"errors"`
	ErrorSamples []string `json:"errorSamples,omitempty"`
	RateLimited  int64    `json:"rateLimited"`            // 429 answers
	RetryWaitS   float64  `json:"retryWaitS,omitempty"`   // summed Retry-After waits
	DrainS       float64  `json:"drainS"`                 // time to finish the calls in flight at the end
	CappedAt     int64    `json:"cappedAt,omitempty"`     // -max-execs stopped the run early
	RetryAfter   []string `json:"retryAfter,omitempty"`   // distinct Retry-After values seen
	QuotaErrors  int64    `json:"quotaErrors,omitempty"`  // 429 quota_exceeded (counted in RateLimited too)
	StatusCounts []string `json:"statusCounts,omitempty"` // non-200 HTTP statuses seen
	// PerSecond counts successful completions in each second from the
	// start of the warm-up (the last entry holds the drain).
	PerSecond []int64 `json:"perSecond"`
	// BusyPct is how busy the machine's CPUs were in the window (all
	// processes, from /proc/stat), and CPUMsPerExec that CPU time divided
	// by the execs completed in it: what one exec costs the machine,
	// which varies less from run to run than throughput.
	BusyPct      float64 `json:"busyPct"`
	CPUMsPerExec float64 `json:"cpuMsPerExec"`
}

// cpuBusy returns the machine's busy and total CPU time from /proc/stat
// (0, 0 where it cannot be read).
func cpuBusy() (busy, total time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += time.Duration(n) * tick
		if i != 3 && i != 4 { // idle, iowait
			busy += time.Duration(n) * tick
		}
	}
	return busy, total
}

// latency summarises a set of timings in milliseconds (nearest-rank
// percentiles, as benchkit.Summarize, with the mean).
type latency struct {
	N      int     `json:"n"`
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	MinMs  float64 `json:"minMs"`
	MaxMs  float64 `json:"maxMs"`
}

func summarize(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	l := benchkit.Summarize(ds)
	return latency{
		N: l.N, MeanMs: benchkit.Ms(benchkit.Mean(ds)),
		P50Ms: l.MedianMs, P90Ms: l.P90Ms, P99Ms: l.P99Ms, MinMs: l.MinMs, MaxMs: l.MaxMs,
	}
}

type report struct {
	ConchBin         string  `json:"conch"`
	GoVersion        string  `json:"goVersion"`
	CPUs             int     `json:"cpus"`
	Agents           int     `json:"agents"`
	Inflight         int     `json:"inflightPerAgent"`
	DurationS        float64 `json:"durationS"`
	WarmupS          float64 `json:"warmupS"`
	Command          string  `json:"command"`
	LoadStart        string  `json:"loadStart"`
	LoadEnd          string  `json:"loadEnd"`
	AgentsCreatedInS float64 `json:"agentsCreatedInS"`
	Conch            run     `json:"conchServe"`
	// Concurrency conch actually sustained: live supervisors of the home
	// sampled every 250 ms in the window (the idle warm spare included).
	SupervisorsMean float64 `json:"supervisorsMean"`
	SupervisorsPeak int     `json:"supervisorsPeak"`
	Samples         int     `json:"samples"`
	LittleInflight  float64 `json:"littleInflight"` // throughput × mean latency, client side
	Baseline        run     `json:"baseline"`
	Ratio           float64 `json:"ratioConchOverBaseline"` // throughputs
	// BaselineBest is the baseline with 2 × NumCPU workers.
	BaselineBest run     `json:"baselineBest"`
	RatioBest    float64 `json:"ratioConchOverBaselineBest"`
	// After the run.
	SessionsRunning      int      `json:"sessionsRunning"` // GET /v1/sessions, all agents
	SessionsListed       int      `json:"sessionsListed"`  // backgrounded sessions listed (0 expected: all execs were foreground)
	SessionCheckErrors   []string `json:"sessionCheckErrors,omitempty"`
	SupervisorsServing   int      `json:"supervisorsWhileServing"` // after the run, conch serve still up: the warm spare
	SupervisorsLeft      int      `json:"supervisorsLeft"`         // after conch serve exited
	ServeExit            string   `json:"serveExit"`
	Failures             []string `json:"failures"`
	BaselineWorkersNote  string   `json:"baselineWorkersNote"`
	ConchServeStartedInS float64  `json:"conchServeStartedInS"`
}

func main() {
	var o options
	flag.StringVar(&o.conch, "conch", "", "the conch binary to measure (required)")
	flag.IntVar(&o.agents, "agents", 50, "agents created through POST /v1/agents")
	flag.IntVar(&o.inflight, "inflight", 20, "execs each agent keeps in flight")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "measured load time, after the warm-up")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before the measured window (not counted)")
	flag.DurationVar(&o.requestTimeout, "request-timeout", 60*time.Second, "deadline of one HTTP call")
	flag.Int64Var(&o.maxExecs, "max-execs", 2_000_000, "stop a side after this many exec calls")
	flag.IntVar(&o.baselineWorkers, "baseline-workers", 0, "baseline concurrency; 0: agents x inflight (at most 1000)")
	flag.StringVar(&o.command, "command", "true", "the command each exec runs (baseline: sh -c COMMAND)")
	flag.BoolVar(&o.json, "json", false, "print the report as JSON")
	flag.Parse()
	if o.conch == "" {
		fmt.Fprintln(os.Stderr, "loadbench: -conch PATH is required")
		os.Exit(2)
	}
	if o.agents < 1 || o.inflight < 1 || o.duration <= 0 || o.warmup < 0 || o.maxExecs < 1 {
		fmt.Fprintln(os.Stderr, "loadbench: -agents, -inflight, -duration and -max-execs must be positive")
		os.Exit(2)
	}
	o.agents = min(o.agents, maxAgents)
	o.inflight = min(o.inflight, maxInflight)
	o.duration = min(o.duration, maxDuration)
	o.warmup = min(o.warmup, maxDuration)
	o.baselineWorkers = min(o.baselineWorkers, maxBaselineW)
	if abs, err := filepath.Abs(o.conch); err == nil {
		o.conch = abs
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(2)
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		printReport(os.Stdout, rep)
	}
	if len(rep.Failures) > 0 {
		os.Exit(1)
	}
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, "loadbench: "+format+"\n", a...) }

func bench(ctx context.Context, o options) (*report, error) {
	rep := &report{
		ConchBin: o.conch, GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Agents: o.agents, Inflight: o.inflight, DurationS: o.duration.Seconds(), WarmupS: o.warmup.Seconds(),
		Command: o.command, LoadStart: loadavg(), Failures: []string{},
	}
	tmp, err := os.MkdirTemp("", "loadbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}
	// The home's supervisors, matched by subcommand and --home whatever
	// the binary's path, zombies left out.
	sups := benchkit.Filter{Home: home, SkipZombies: true}

	t0 := time.Now()
	g, err := startServe(o.conch, home, tmp)
	if err != nil {
		sups.KillSupervisors()
		return nil, err
	}
	rep.ConchServeStartedInS = time.Since(t0).Seconds()
	defer func() {
		g.stop()
		sups.KillSupervisors()
	}()
	logf("conch serve on %s (home %s)", g.base, home)

	total := o.agents * o.inflight
	client := &http.Client{
		Timeout: o.requestTimeout,
		Transport: &http.Transport{
			MaxIdleConns:        total + 16,
			MaxIdleConnsPerHost: total + 16,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
	defer client.CloseIdleConnections()

	t0 = time.Now()
	tokens, err := createAgents(ctx, client, g, o.agents)
	if err != nil {
		return nil, err
	}
	rep.AgentsCreatedInS = time.Since(t0).Seconds()
	logf("created %d agents in %.2fs; %d agents x %d execs in flight for %v (+%v warm-up)", len(tokens), rep.AgentsCreatedInS, o.agents, o.inflight, o.duration, o.warmup)

	// The conch side, with the supervisor sampler.
	sampCtx, sampStop := context.WithCancel(ctx)
	var samples []int
	var sampWG sync.WaitGroup
	sampWG.Add(1)
	warmEnd := time.Now().Add(o.warmup)
	end := warmEnd.Add(o.duration)
	go func() {
		defer sampWG.Done()
		tk := time.NewTicker(sampleGap)
		defer tk.Stop()
		for {
			select {
			case <-sampCtx.Done():
				return
			case now := <-tk.C:
				if now.After(warmEnd) && now.Before(end) {
					samples = append(samples, len(sups.Supervisors()))
				}
			}
		}
	}()
	body, _ := json.Marshal(map[string]any{"command": o.command})
	// A gateway that dies ends the conch side at once (no spinning on
	// refused connections).
	loadCtx, loadStop := context.WithCancel(ctx)
	go func() {
		select {
		case <-g.done:
			logf("conch serve exited during the run: %s", exitText(g.waitErr))
			loadStop()
		case <-loadCtx.Done():
		}
	}()
	rep.Conch = load(loadCtx, warmEnd, end, o.maxExecs, total, func(i int) func(context.Context) outcome {
		token := tokens[i/o.inflight]
		return func(ctx context.Context) outcome { return execHTTP(ctx, client, g.base, token, body) }
	})
	loadStop()
	sampStop()
	sampWG.Wait()
	select {
	case <-g.done:
		rep.Failures = append(rep.Failures, "conch serve exited during the run: "+exitText(g.waitErr))
	default:
	}
	if len(samples) > 0 {
		sum := 0
		for _, s := range samples {
			sum += s
			rep.SupervisorsPeak = max(rep.SupervisorsPeak, s)
		}
		rep.SupervisorsMean = float64(sum) / float64(len(samples))
	}
	rep.Samples = len(samples)
	rep.LittleInflight = rep.Conch.ExecPerS * rep.Conch.Latency.MeanMs / 1000
	logf("conch: %d ok in window, %.1f exec/s, p50 %.1f ms, p99 %.1f ms, %d errors, %d rate-limited; supervisors mean %.1f peak %d",
		rep.Conch.OK, rep.Conch.ExecPerS, rep.Conch.Latency.P50Ms, rep.Conch.Latency.P99Ms, rep.Conch.Errors, rep.Conch.RateLimited, rep.SupervisorsMean, rep.SupervisorsPeak)

	// Nothing may be left running: ask every agent, then count the home's
	// supervisors while conch serve is still up (its warm spare) and after
	// it exited (none).
	time.Sleep(settleAfterRun)
	for i, tok := range tokens {
		running, listed, err := runningSessions(ctx, client, g.base, tok)
		if err != nil {
			rep.SessionCheckErrors = append(rep.SessionCheckErrors, fmt.Sprintf("%s: %v", agentName(i, o.agents), err))
			continue
		}
		rep.SessionsRunning += running
		rep.SessionsListed += listed
	}
	rep.SupervisorsServing = len(sups.Supervisors())
	rep.ServeExit = g.stop()
	deadline := time.Now().Add(5 * time.Second)
	for len(sups.Supervisors()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	rep.SupervisorsLeft = sups.KillSupervisors()

	// The baseline: as many sh -c runs in flight as conch had execs.
	w := o.baselineWorkers
	if w > 0 {
		rep.BaselineWorkersNote = "set by -baseline-workers"
	} else {
		w = min(o.agents*o.inflight, maxBaselineW)
		rep.BaselineWorkersNote = "agents x inflight, as many as conch had in flight"
	}
	baseline := func(w int) run {
		logf("baseline: sh -c %q with %d workers for %v (+%v warm-up)", o.command, w, o.duration, o.warmup)
		warmEnd := time.Now().Add(o.warmup)
		end := warmEnd.Add(o.duration)
		return load(ctx, warmEnd, end, o.maxExecs, w, func(int) func(context.Context) outcome {
			return func(ctx context.Context) outcome { return execDirect(ctx, o.command) }
		})
	}
	rep.Baseline = baseline(w)
	rep.Ratio = benchkit.Ratio(rep.Conch.ExecPerS, rep.Baseline.ExecPerS)
	// And the baseline at its best: few workers, no contention.
	rep.BaselineBest = baseline(2 * runtime.NumCPU())
	rep.RatioBest = benchkit.Ratio(rep.Conch.ExecPerS, rep.BaselineBest.ExecPerS)
	rep.LoadEnd = loadavg()

	if rep.Conch.Errors > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d exec calls failed", rep.Conch.Errors))
	}
	if rep.Conch.OKTotal == 0 {
		rep.Failures = append(rep.Failures, "no exec call succeeded")
	}
	if n := rep.Baseline.Errors + rep.BaselineBest.Errors; n > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d baseline runs failed", n))
	}
	if rep.SessionsRunning > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d sessions still running after the run", rep.SessionsRunning))
	}
	if len(rep.SessionCheckErrors) > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("GET /v1/sessions failed for %d agents", len(rep.SessionCheckErrors)))
	}
	if rep.SupervisorsLeft > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d supervisors outlived conch serve (killed)", rep.SupervisorsLeft))
	}
	if ctx.Err() != nil {
		rep.Failures = append(rep.Failures, "interrupted")
	}
	return rep, nil
}

// outcome is the result of one exec call.
type outcome struct {
	ok          bool
	rateLimited bool
	quota       bool
	retryAfter  time.Duration
	retryRaw    string
	status      int
	err         string
}

// load runs workers that call do in a loop until end; calls that
// completed after warmEnd and by end are measured. A worker answered 429 waits for
// Retry-After (never past end) before its next call.
func load(ctx context.Context, warmEnd, end time.Time, maxExecs int64, workers int, mk func(i int) func(context.Context) outcome) run {
	var (
		issued  atomic.Int64
		mu      sync.Mutex
		r       = run{Workers: workers}
		lats    []time.Duration
		retry   = map[string]bool{}
		codes   = map[int]int{}
		wg      sync.WaitGroup
		lastEnd time.Time
		begin   = time.Now()
		slots   = make([]int64, int(math.Ceil(end.Sub(begin).Seconds()))+1)
	)
	var busy0, total0, busy1, total1 time.Duration
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		time.Sleep(time.Until(warmEnd))
		busy0, total0 = cpuBusy()
		time.Sleep(time.Until(end))
		busy1, total1 = cpuBusy()
	}()
	for i := range workers {
		do := mk(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lats = append(lats, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil && time.Now().Before(end) {
				if issued.Add(1) > maxExecs {
					mu.Lock()
					r.CappedAt = maxExecs
					mu.Unlock()
					return
				}
				start := time.Now()
				oc := do(ctx)
				done := time.Now()
				// Measured: calls that completed in the window, whenever
				// they started (with many calls in flight, latency can
				// exceed the window).
				inWindow := !done.Before(warmEnd) && !done.After(end)
				mu.Lock()
				if done.After(lastEnd) {
					lastEnd = done
				}
				switch {
				case oc.ok:
					r.OKTotal++
					slots[min(int(done.Sub(begin)/time.Second), len(slots)-1)]++
					if inWindow {
						r.OK++
					}
				case oc.rateLimited:
					r.RateLimited++
					if oc.quota {
						r.QuotaErrors++
					}
					retry[oc.retryRaw] = true
				default:
					r.Errors++
					if len(r.ErrorSamples) < errorSamples {
						r.ErrorSamples = append(r.ErrorSamples, oc.err)
					}
				}
				if oc.status != 0 && oc.status != 200 {
					codes[oc.status]++
				}
				mu.Unlock()
				if oc.ok && inWindow {
					mine = append(mine, done.Sub(start))
				}
				if oc.rateLimited {
					wait := min(oc.retryAfter, time.Until(end))
					if wait > 0 {
						mu.Lock()
						r.RetryWaitS += wait.Seconds()
						mu.Unlock()
						select {
						case <-ctx.Done():
						case <-time.After(wait):
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if time.Now().Before(end) {
		busy1, total1 = cpuBusy() // capped or interrupted
	} else {
		<-sampled
	}
	if total1 > total0 && r.OK > 0 {
		r.BusyPct = 100 * float64(busy1-busy0) / float64(total1-total0)
		r.CPUMsPerExec = float64(busy1-busy0) / float64(time.Millisecond) / float64(r.OK)
	}
	// The window is the measured time; a run capped by -max-execs or
	// interrupted ends earlier.
	stopAt := end
	if lastEnd.Before(end) {
		stopAt = lastEnd
	}
	r.WindowS = max(0, stopAt.Sub(warmEnd).Seconds())
	if lastEnd.After(end) {
		r.DrainS = lastEnd.Sub(end).Seconds()
	}
	r.ExecPerS = benchkit.Ratio(float64(r.OK), r.WindowS)
	r.Latency = summarize(lats)
	r.PerSecond = slots
	for k := range retry {
		r.RetryAfter = append(r.RetryAfter, k)
	}
	slices.Sort(r.RetryAfter)
	for c, n := range codes {
		r.StatusCounts = append(r.StatusCounts, fmt.Sprintf("%d×%d", n, c))
	}
	slices.Sort(r.StatusCounts)
	return r
}

// execHTTP is one POST /v1/exec. Success is HTTP 200 with details.status
// "completed" and exit code 0.
func execHTTP(ctx context.Context, client *http.Client, base, token string, body []byte) outcome {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/exec", bytes.NewReader(body))
	if err != nil {
		return outcome{err: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return outcome{err: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return outcome{status: resp.StatusCode, err: "read body: " + err.Error()}
	}
	var m struct {
		Text    string `json:"text"`
		Details struct {
			Status   string `json:"status"`
			ExitCode *int   `json:"exitCode"`
			Error    *struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"details"`
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	jerr := json.Unmarshal(b, &m)
	if resp.StatusCode == http.StatusTooManyRequests {
		code := ""
		if m.Details.Error != nil {
			code = m.Details.Error.Code
		} else if m.Error != nil {
			code = m.Error.Code
		}
		ra := resp.Header.Get("Retry-After")
		return outcome{rateLimited: true, quota: code == "quota_exceeded", status: 429, retryAfter: parseRetryAfter(ra), retryRaw: ra}
	}
	if resp.StatusCode != 200 || jerr != nil || m.Details.Status != "completed" || m.Details.ExitCode == nil || *m.Details.ExitCode != 0 {
		return outcome{status: resp.StatusCode, err: fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, bytes.TrimSpace(b))}
	}
	return outcome{ok: true, status: 200}
}

// parseRetryAfter reads delay-seconds or an HTTP date; 1 s when missing
// or unreadable.
func parseRetryAfter(v string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t))
	}
	return time.Second
}

// execDirect is the baseline: sh -c command under os/exec.
func execDirect(ctx context.Context, command string) outcome {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	if err := cmd.Run(); err != nil {
		return outcome{err: "sh -c: " + err.Error()}
	}
	return outcome{ok: true}
}

// gateway is the conch serve under test.
type gateway struct {
	cmd      *exec.Cmd
	base     string
	operator string
	done     chan struct{} // closed when conch serve has exited
	waitErr  error         // valid after done
	once     sync.Once
	exit     string
}

var listenRE = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)

// startServe starts conch serve on a loopback port of its choosing and
// waits for its "listening on" line.
func startServe(conch, home, dir string) (*gateway, error) {
	cmd := exec.Command(conch, "serve", "--home", home, "--listen", "127.0.0.1:0", "--log-level", "warn")
	cmd.Dir = dir
	// The baseline runs sh -c; conch runs the user's shell.
	cmd.Env = append(os.Environ(), "SHELL=/bin/sh")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &gateway{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	go func() { g.waitErr = cmd.Wait(); close(g.done) }()
	select {
	case base, ok := <-found:
		if !ok {
			g.stop()
			return nil, errors.New("conch serve exited before listening")
		}
		g.base = base
	case <-time.After(20 * time.Second):
		g.stop()
		return nil, errors.New("conch serve did not start within 20s")
	}
	b, err := os.ReadFile(filepath.Join(home, "operator.token"))
	if err != nil {
		g.stop()
		return nil, err
	}
	g.operator = strings.TrimSpace(string(b))
	return g, nil
}

// stop sends SIGTERM, then SIGKILL after 10 s, and reports how it ended.
func (g *gateway) stop() string {
	g.once.Do(func() {
		select {
		case <-g.done:
			g.exit = "had already exited: " + exitText(g.waitErr)
			return
		default:
		}
		g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.done:
			g.exit = exitText(g.waitErr)
		case <-time.After(10 * time.Second):
			g.cmd.Process.Kill()
			<-g.done
			g.exit = "killed after 10s: " + exitText(g.waitErr)
		}
	})
	return g.exit
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

func agentName(i, n int) string {
	w := max(2, len(strconv.Itoa(n)))
	return fmt.Sprintf("a%0*d", w, i+1)
}

// createAgents adds agents a01… through POST /v1/agents and returns their
// tokens.
func createAgents(ctx context.Context, client *http.Client, g *gateway, n int) ([]string, error) {
	tokens := make([]string, n)
	for i := range n {
		body, _ := json.Marshal(map[string]string{"name": agentName(i, n)})
		req, _ := http.NewRequestWithContext(ctx, "POST", g.base+"/v1/agents", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+g.operator)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("POST /v1/agents: %w", err)
		}
		var m struct {
			Token string `json:"token"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode != 200 || json.Unmarshal(b, &m) != nil || m.Token == "" {
			return nil, fmt.Errorf("POST /v1/agents %s: HTTP %d %s", agentName(i, n), resp.StatusCode, bytes.TrimSpace(b))
		}
		tokens[i] = m.Token
	}
	return tokens, nil
}

// runningSessions asks GET /v1/sessions how many of the agent's sessions
// are running and how many are listed.
func runningSessions(ctx context.Context, client *http.Client, base, token string) (running, listed int, err error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var m struct {
		Details struct {
			Sessions []struct {
				Status string `json:"status"`
			} `json:"sessions"`
		} `json:"details"`
	}
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return 0, 0, err
	}
	for _, s := range m.Details.Sessions {
		if s.Status == "running" {
			running++
		}
	}
	return running, len(m.Details.Sessions), nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func printReport(w io.Writer, r *report) {
	fmt.Fprintf(w, "loadbench: conch serve under %d agents x %d execs in flight (POST /v1/exec {\"command\":%q}), %.0fs measured after %.0fs warm-up\n",
		r.Agents, r.Inflight, r.Command, r.DurationS, r.WarmupS)
	fmt.Fprintf(w, "machine: %d CPUs, %s; load average start %s, end %s\n", r.CPUs, r.GoVersion, r.LoadStart, r.LoadEnd)
	fmt.Fprintf(w, "setup: conch serve listening after %.2fs; %d agents created in %.2fs\n\n", r.ConchServeStartedInS, r.Agents, r.AgentsCreatedInS)
	fmt.Fprintf(w, "%-34s %10s %10s %10s %10s %10s %8s %8s %8s %12s\n", "", "workers", "exec/s", "p50 ms", "p99 ms", "max ms", "errors", "429s", "busy %", "CPU ms/exec")
	row := func(name string, x run) {
		fmt.Fprintf(w, "%-34s %10d %10.1f %10.1f %10.1f %10.1f %8d %8d %8.0f %12.3f\n", name, x.Workers, x.ExecPerS, x.Latency.P50Ms, x.Latency.P99Ms, x.Latency.MaxMs, x.Errors, x.RateLimited, x.BusyPct, x.CPUMsPerExec)
	}
	row("conch serve POST /v1/exec", r.Conch)
	row("baseline os/exec sh -c", r.Baseline)
	row("baseline, 2 x NumCPU workers", r.BaselineBest)
	fmt.Fprintf(w, "\nthroughput ratio conch/baseline: %.3f (baseline is %.1fx conch); to the best baseline: %.3f\n", r.Ratio, benchkit.Ratio(1, r.Ratio), r.RatioBest)
	fmt.Fprintf(w, "CPU per exec, baseline/conch: %.3f (the same comparison by machine CPU time per exec instead of by throughput)\n", benchkit.Ratio(r.Baseline.CPUMsPerExec, r.Conch.CPUMsPerExec))
	fmt.Fprintf(w, "conch: %d execs ok in the %.1fs window (%d in all), drain %.2fs", r.Conch.OK, r.Conch.WindowS, r.Conch.OKTotal, r.Conch.DrainS)
	if r.Conch.RateLimited > 0 {
		fmt.Fprintf(w, "; 429s %d (quota %d), Retry-After %v, %.1fs waited in all", r.Conch.RateLimited, r.Conch.QuotaErrors, r.Conch.RetryAfter, r.Conch.RetryWaitS)
	}
	if len(r.Conch.StatusCounts) > 0 {
		fmt.Fprintf(w, "; HTTP statuses %v", r.Conch.StatusCounts)
	}
	fmt.Fprintln(w)
	for _, e := range r.Conch.ErrorSamples {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
	fmt.Fprintf(w, "conch completions per second (warm-up first, drain last): %v\n", r.Conch.PerSecond)
	fmt.Fprintf(w, "conch concurrency: live supervisor processes mean %.1f, peak %d (%d samples; a host serves many sessions); client side in flight (Little) %.0f\n",
		r.SupervisorsMean, r.SupervisorsPeak, r.Samples, r.LittleInflight)
	fmt.Fprintf(w, "baseline workers: %d (%s); %d runs ok in the %.1fs window\n", r.Baseline.Workers, r.BaselineWorkersNote, r.Baseline.OK, r.Baseline.WindowS)
	for _, e := range r.Baseline.ErrorSamples {
		fmt.Fprintf(w, "  baseline error: %s\n", e)
	}
	fmt.Fprintf(w, "afterwards: sessions running %d, listed %d (GET /v1/sessions, %d agents); supervisors while serving %d (the idle host or warm spare), after conch serve exited %d; conch serve: %s\n",
		r.SessionsRunning, r.SessionsListed, r.Agents, r.SupervisorsServing, r.SupervisorsLeft, r.ServeExit)
	for _, e := range r.SessionCheckErrors {
		fmt.Fprintf(w, "  session check: %s\n", e)
	}
	if len(r.Failures) == 0 {
		fmt.Fprintln(w, "result: OK (0 errors, 0 sessions left)")
	} else {
		fmt.Fprintf(w, "result: FAILED: %s\n", strings.Join(r.Failures, "; "))
	}
}
