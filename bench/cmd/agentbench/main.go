// Command agentbench measures the agent-facing features of a built conch
// binary end to end, over `conch mcp` on stdio with the official MCP Go
// SDK client, each against a baseline measured in the same run:
//
//  1. wait: latency of `process wait until=regex` (arrival of the result
//     minus the time the matching line was written); baseline: os/exec
//     reading the same script's stdout.
//  2. search: `process search` over a ~100 MB journal; baseline: `grep -n`
//     over the same data in a file.
//  3. tokens: the rendered exec result of `cat <recorded output>` against
//     the raw bytes (and against a naive escape-stripping regexp).
//  4. devserver: the tool calls a scripted agent needs to start a dev
//     server, wait until it serves and see its first request, and the
//     size of tools/list; against -baseline-conch too when given.
//  5. first: the first exec of a fresh engine (yieldMs 500) while the
//     login-shell PATH probe may still run; baseline: the probe alone;
//     against -baseline-conch too when given.
//
// It exits non-zero only when conch misbehaves (failed calls, wrong
// matches, escapes left in cleaned text), never because it is slow.
//
//	agentbench -conch PATH [-baseline-conch PATH] [-testdata DIR] [-steps wait,search,tokens,devserver,first] [-n 50] [--json]
//
// bench/agent.sh builds conch and agentbench and runs it; see bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

type options struct {
	conch       string
	baseline    string
	devN        int
	testdata    string
	waitN       int
	searchBytes int64
	searchReps  int
	steps       map[string]bool
	dump        string
	json        bool
	firstN      int
	slowProfile time.Duration
}

type report struct {
	Conch      string         `json:"conch"`
	Version    string         `json:"version"`
	GoVersion  string         `json:"goVersion"`
	Platform   string         `json:"platform"`
	CPUs       int            `json:"cpus"`
	StartedAt  time.Time      `json:"startedAt"`
	LoadBefore string         `json:"loadAverageBefore"`
	LoadAfter  string         `json:"loadAverageAfter"`
	Wall       float64        `json:"wallSeconds"`
	Wait       *waitStep      `json:"wait,omitempty"`
	Search     *searchStep    `json:"search,omitempty"`
	Tokens     []tokenRow     `json:"tokens,omitempty"`
	DevServer  *devServerStep `json:"devServer,omitempty"`
	First      *firstStep     `json:"firstCall,omitempty"`
	Notes      []string       `json:"notes,omitempty"`
	Failures   []string       `json:"failures"`
	OK         bool           `json:"ok"`
}

type run struct {
	ctx context.Context
	o   options

	mu       sync.Mutex
	failures []string
	notes    []string
}

func (r *run) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.failures = append(r.failures, msg)
	r.mu.Unlock()
	fmt.Fprintln(os.Stderr, "agentbench: FAIL:", msg)
}

func (r *run) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.notes = append(r.notes, msg)
	r.mu.Unlock()
}

func main() {
	var o options
	var steps string
	flag.StringVar(&o.conch, "conch", "", "the conch binary to measure (required)")
	flag.StringVar(&o.baseline, "baseline-conch", "", "an older conch binary to run steps devserver and first against too (the \"before\")")
	flag.IntVar(&o.devN, "dev-n", 5, "repetitions of step devserver")
	flag.StringVar(&o.testdata, "testdata", "bench/testdata", "directory of the recorded samples (step tokens)")
	flag.IntVar(&o.waitN, "n", 50, "repetitions of each kind of regex wait (step wait)")
	flag.Int64Var(&o.searchBytes, "search-bytes", 100_000_000, "journal size of step search")
	flag.IntVar(&o.searchReps, "search-reps", 5, "repetitions of each search and each grep")
	flag.StringVar(&steps, "steps", "wait,search,tokens,devserver,first", "comma-separated subset of wait,search,tokens,devserver,first")
	flag.IntVar(&o.firstN, "first-n", 3, "repetitions of each first-call series (step first)")
	flag.DurationVar(&o.slowProfile, "slow-profile", 5*time.Second, "how long the simulated slow .profile sleeps (step first)")
	flag.StringVar(&o.dump, "dump", "", "write the cleaned text of each sample into this directory")
	flag.BoolVar(&o.json, "json", false, "print the report as JSON")
	flag.Parse()
	if o.conch == "" {
		fmt.Fprintln(os.Stderr, "agentbench: -conch PATH is required")
		os.Exit(2)
	}
	abs, err := filepath.Abs(o.conch)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(2)
	}
	o.conch = abs
	if o.baseline != "" {
		if o.baseline, err = filepath.Abs(o.baseline); err != nil {
			fmt.Fprintln(os.Stderr, "agentbench:", err)
			os.Exit(2)
		}
	}
	o.devN = max(o.devN, 1)
	o.steps = map[string]bool{}
	for _, s := range strings.Split(steps, ",") {
		s = strings.TrimSpace(s)
		switch s {
		case "wait", "search", "tokens", "devserver", "first":
			o.steps[s] = true
		case "":
		default:
			fmt.Fprintf(os.Stderr, "agentbench: unknown step %q\n", s)
			os.Exit(2)
		}
	}
	o.waitN = max(o.waitN, 1)
	o.firstN = max(o.firstN, 1)
	o.searchReps = max(o.searchReps, 1)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &run{ctx: ctx, o: o}
	rep := &report{Conch: o.conch, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		CPUs: runtime.NumCPU(), StartedAt: time.Now(), LoadBefore: loadavg()}
	if out, err := exec.Command(o.conch, "version").Output(); err == nil {
		rep.Version = strings.TrimSpace(string(out))
	}
	start := time.Now()
	if o.steps["wait"] {
		fmt.Fprintln(os.Stderr, "agentbench: step wait")
		rep.Wait = r.waitLatency()
	}
	if o.steps["search"] {
		fmt.Fprintln(os.Stderr, "agentbench: step search")
		rep.Search = r.searchJournal()
	}
	if o.steps["tokens"] {
		fmt.Fprintln(os.Stderr, "agentbench: step tokens")
		rep.Tokens = r.tokens()
	}
	if o.steps["devserver"] {
		fmt.Fprintln(os.Stderr, "agentbench: step devserver")
		rep.DevServer = r.devServer()
	}
	if o.steps["first"] {
		fmt.Fprintln(os.Stderr, "agentbench: step first")
		rep.First = r.firstCall()
	}
	rep.Wall = time.Since(start).Seconds()
	rep.LoadAfter = loadavg()
	rep.Notes, rep.Failures = r.notes, r.failures
	if rep.Failures == nil {
		rep.Failures = []string{}
	}
	rep.OK = len(rep.Failures) == 0
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		printReport(os.Stdout, rep)
	}
	if !rep.OK {
		os.Exit(1)
	}
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

// startServer starts `conch mcp` on a fresh temporary home with config as
// its config.json; the texts of its results come without conch's
// "[conch event]" notices.
func startServer(ctx context.Context, bin, config string) (*benchkit.Server, error) {
	return benchkit.StartServer(ctx, bin, benchkit.ServerOptions{Name: "agentbench", Config: config, StripNotices: true})
}

func goal(met bool) string {
	if met {
		return "goal met"
	}
	return "goal NOT met"
}

func printReport(w io.Writer, rep *report) {
	fmt.Fprintf(w, "agentbench: %s (%s), %s, %d CPUs, %s\n", rep.Conch, rep.Version, rep.Platform, rep.CPUs, rep.GoVersion)
	fmt.Fprintf(w, "load average before %s, after %s; %.1f s\n\n", rep.LoadBefore, rep.LoadAfter, rep.Wall)
	lat := func(name string, l benchkit.Latency) {
		fmt.Fprintf(w, "  %-38s %4d %8.1f %8.1f %8.1f %8.1f %8.1f\n", name, l.N, l.MedianMs, l.P90Ms, l.P99Ms, l.MinMs, l.MaxMs)
	}
	if s := rep.Wait; s != nil {
		fmt.Fprintf(w, "1. Regex wait latency: result arrival − time the MARK line was written (ms)\n")
		fmt.Fprintf(w, "   command: %s\n", s.Command)
		fmt.Fprintf(w, "  %-38s %4s %8s %8s %8s %8s %8s\n", "", "n", "p50", "p90", "p99", "min", "max")
		lat("conch wait, process keeps running", s.Live)
		lat("conch wait, process exits after line", s.Exit)
		lat("baseline: os/exec reads the pipe", s.Direct)
		lat("(wait's own elapsedMs, running case)", s.ElapsedLive)
		fmt.Fprintf(w, "  goal ≤ %d ms for every repetition: running %s (%d/%d within), exiting %s\n", goalWaitMs,
			goal(s.LiveGoal), s.WithinGoal, s.Live.N, goal(s.ExitGoal))
		fmt.Fprintf(w, "  p50 over baseline p50: +%.1f ms\n\n", s.Live.MedianMs-s.Direct.MedianMs)
	}
	if s := rep.Search; s != nil {
		fmt.Fprintf(w, "2. process search over a %d-byte journal (%d lines of %d bytes)\n", s.Bytes, s.Lines, s.Bytes/max(s.Lines, 1))
		fmt.Fprintf(w, "   generator: %s\n", s.Generator)
		fmt.Fprintf(w, "   capture through conch: %.0f ms (exec to the end seen by process wait); same generator into a file: %.0f ms (%.1fx)\n",
			s.CaptureMs, s.GenerateMs, benchkit.Ratio(s.CaptureMs, s.GenerateMs))
		fmt.Fprintf(w, "  %-12s %8s %14s %14s %8s   %s\n", "pattern", "matches", "conch p50 ms", "grep -n p50 ms", "ratio", "all conch / grep ms")
		for _, p := range s.Patterns {
			fmt.Fprintf(w, "  %-12s %8d %14.1f %14.1f %7.1fx   %v / %v\n", p.Pattern, p.Matches, p.ConchMedian, p.GrepMedian, p.Ratio, fmtMs(p.ConchMs), fmtMs(p.GrepMs))
		}
		fmt.Fprintf(w, "   conch mcp peak RSS (VmHWM): %.0f MiB after the capture, %.0f MiB after the searches\n", s.RSSBeforeMiB, s.PeakMiB)
		for _, c := range s.Reads {
			fmt.Fprintf(w, "   fresh conch mcp, %-30s %6.0f ms, %6d chars returned, peak RSS %.0f -> %.0f MiB\n", c.Name, c.Ms, c.Chars, c.BeforeMiB, c.PeakMiB)
		}
		fmt.Fprintln(w)
	}
	if len(rep.Tokens) > 0 {
		fmt.Fprintf(w, "3. Token savings: exec `cat <sample>` (and `seq 1 100000`); tokens ≈ chars/4\n")
		fmt.Fprintf(w, "   before = the result at maxOutputChars 200000 (the former default), after = the default\n")
		fmt.Fprintf(w, "  %-18s %9s %9s %9s %9s %9s %9s %7s %9s %7s %5s %5s\n", "sample", "raw B", "raw ch", "~tok raw", "before ch", "~tok bef", "after ch", "~tok", "after/raw", "strip", "folds", "trunc")
		var rawT, cleanT, beforeT int
		for _, t := range rep.Tokens {
			fmt.Fprintf(w, "  %-18s %9d %9d %9d %9d %9d %9d %7d %8.1f%% %6.1f%% %5d %5v\n", t.File, t.RawBytes, t.RawChars, t.RawTokens, t.BeforeChars, t.BeforeTokens, t.CleanChars, t.CleanTokens,
				100*t.Ratio, 100*t.StripRatio, t.Folds, t.Truncated)
			rawT += t.RawTokens
			cleanT += t.CleanTokens
			beforeT += t.BeforeTokens
		}
		fmt.Fprintf(w, "  %-18s %9s %9s %9d %9s %9d %9s %7d %8.1f%%\n", "total", "", "", rawT, "", beforeT, "", cleanT, 100*benchkit.Ratio(float64(cleanT), float64(rawT)))
		fmt.Fprintf(w, "  strip = a regexp that removes CSI/OSC escapes only (CRs and repeats kept), as %% of raw chars\n")
		for _, t := range rep.Tokens {
			fmt.Fprintf(w, "  %-18s %s; last line: %q\n", t.File, t.What, benchkit.Clip(t.LastLine, 100))
		}
		fmt.Fprintln(w)
	}
	if rep.DevServer != nil {
		printDevServer(w, rep.DevServer)
	}
	if rep.First != nil {
		printFirst(w, rep.First)
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if rep.OK {
		fmt.Fprintln(w, "OK: no failures")
	} else {
		fmt.Fprintf(w, "FAILED (%d):\n", len(rep.Failures))
		for _, f := range rep.Failures {
			fmt.Fprintln(w, "  -", f)
		}
	}
}

func fmtMs(v []float64) string {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.0f", x)
	}
	return b.String()
}
