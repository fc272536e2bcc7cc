// Command conchbench measures a built conch binary end to end: it runs
// `conch mcp` on a fresh temporary home, drives it over stdio with the
// official MCP Go SDK client, and compares each figure with a baseline
// measured in the same run (Go's os/exec running the same shell command
// directly). It reports ratios and "goal met / not met" notes, and exits
// non-zero only when conch misbehaves (error results, lost or reordered
// output, unbounded results), never because it is slow.
//
// Usage:
//
//	conchbench -conch PATH [-n 200] [-bytes 52428800] [-big] [-sessions 200] [--json]
//
// bench/run.sh builds conch and conchbench and runs it; see bench/README.md.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
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
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

// Goals the report compares against. They are reported, never asserted.
const (
	goalRoundTripRatio = 2.0 // conch exec "true" median ÷ sh -c true median
	goalGrowthMiB      = 64  // conch RSS growth while a session prints 1 GiB
	goalPerSessionMiB  = 3.0 // supervisor USS per idle background session
)

const (
	resultCharsLimit    = 210000                    // chars an exec result may hold (200,000 of output plus notes)
	omitMarker          = "chars omitted"           // render.OmitMarker: head and tail kept, middle omitted
	repeatMarker        = "[previous line repeated" // render's fold of identical lines
	pollSkipMarker      = "chars skipped"           // poll's marker, if the exec had to be polled
	defaultTimeBin      = "/usr/bin/time"
	callLimit           = 60 * time.Second
	verifyWorkers       = 32
	supervisorSampleGap = 100 * time.Millisecond
	ussSampleGap        = 250 * time.Millisecond
)

// options are the command-line flags.
type options struct {
	conch    string
	n        int
	warmup   int
	bytes    int64
	reps     int
	big      bool
	bigBytes int64
	sessions int
	lines    int
	workers  int
	timeBin  string
	hello    string
	steps    map[string]bool
	json     bool
}

// report is everything one run measured; --json prints it as is.
type report struct {
	Conch       string           `json:"conch"`
	Version     string           `json:"version"`
	GoVersion   string           `json:"goVersion"`
	Platform    string           `json:"platform"`
	CPUs        int              `json:"cpus"`
	StartedAt   time.Time        `json:"startedAt"`
	LoadBefore  string           `json:"loadAverageBefore"`
	LoadAfter   string           `json:"loadAverageAfter"`
	WallSeconds float64          `json:"wallSeconds"`
	RoundTrip   *roundTrip       `json:"roundTrip,omitempty"`
	Capture     *capture         `json:"capture,omitempty"`
	Big         *bigOutput       `json:"bigOutput,omitempty"`
	Sessions    *sessions        `json:"sessions,omitempty"`
	Sandbox     *sandboxOverhead `json:"sandbox,omitempty"`
	Start       *startCost       `json:"start,omitempty"`
	Parallel    *parallel        `json:"parallel,omitempty"`
	Notes       []string         `json:"notes,omitempty"`
	Warnings    []string         `json:"warnings,omitempty"`
	Failures    []string         `json:"failures"`
	OK          bool             `json:"ok"`
}

// run collects failures from the measurements; it is safe for
// concurrent use.
type run struct {
	ctx context.Context
	o   options

	mu       sync.Mutex // guards failures, notes, warnings and warned
	failures []string
	notes    []string
	warnings []string
	warned   map[string]bool // warning keys already recorded
}

func (r *run) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.failures = append(r.failures, msg)
	r.mu.Unlock()
	fmt.Fprintln(os.Stderr, "conchbench: FAIL:", msg)
}

// warn records output that looks wrong without being one of the
// failures conchbench exits non-zero for, once per key.
func (r *run) warn(key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warned[key] {
		return
	}
	if r.warned == nil {
		r.warned = map[string]bool{}
	}
	r.warned[key] = true
	r.warnings = append(r.warnings, msg)
	fmt.Fprintln(os.Stderr, "conchbench: warning:", msg)
}

func (r *run) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.notes = append(r.notes, msg)
	r.mu.Unlock()
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "conchbench: "+format+"\n", args...)
}

func main() {
	var o options
	flag.StringVar(&o.conch, "conch", "", "path of the conch binary to measure (required)")
	flag.IntVar(&o.n, "n", 200, "round trips measured per command (after -warmup)")
	flag.IntVar(&o.warmup, "warmup", 10, "warm-up round trips before measuring")
	flag.Int64Var(&o.bytes, "bytes", 50<<20, "output size of the capture-throughput step, in bytes")
	flag.IntVar(&o.reps, "reps", 3, "repetitions of the capture step on each side (the median is reported)")
	flag.BoolVar(&o.big, "big", false, "also run the large-output step (-big-bytes, default 1 GiB) with RSS measurement")
	flag.Int64Var(&o.bigBytes, "big-bytes", 1<<30, "output size of the -big step, in bytes")
	flag.IntVar(&o.sessions, "sessions", 200, "concurrent background sessions")
	flag.IntVar(&o.workers, "workers", 16, "exec calls in flight while starting the background sessions")
	flag.IntVar(&o.lines, "lines", 50, "lines each background session prints, 0.1 s apart")
	flag.StringVar(&o.timeBin, "time", defaultTimeBin, "GNU time used for the -big step (\"\" to skip it)")
	flag.BoolVar(&o.json, "json", false, "print the report as JSON")
	flag.StringVar(&o.hello, "hello", "", "a hello-world Go program, the baseline of step start (bench/run.sh builds bench/cmd/hello)")
	steps := flag.String("steps", "start,roundtrip,capture,big,sessions,sandbox,parallel", "comma-separated steps to run (big also needs -big)")
	flag.Parse()
	o.steps = map[string]bool{}
	for _, st := range strings.Split(*steps, ",") {
		switch st = strings.TrimSpace(st); st {
		case "start", "roundtrip", "capture", "big", "sessions", "sandbox", "parallel":
			o.steps[st] = true
		default:
			fmt.Fprintf(os.Stderr, "conchbench: unknown step %q in -steps\n", st)
			os.Exit(2)
		}
	}
	if o.conch == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: conchbench -conch PATH [flags]; see -help")
		os.Exit(2)
	}
	if o.n < 1 || o.warmup < 0 || o.bytes < 1 || o.bigBytes < 1 || o.sessions < 1 || o.lines < 1 || o.reps < 1 || o.workers < 1 {
		fmt.Fprintln(os.Stderr, "conchbench: -n, -bytes, -big-bytes, -reps, -sessions, -workers and -lines must be positive, -warmup not negative")
		os.Exit(2)
	}
	abs, err := filepath.Abs(o.conch)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "conchbench: conch binary: %v\n", err)
		os.Exit(2)
	}
	o.conch = abs

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep := measure(ctx, o)
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		printReport(os.Stdout, rep, o)
	}
	if !rep.OK {
		os.Exit(1)
	}
}

// measure runs every step in order and returns the report.
func measure(ctx context.Context, o options) *report {
	start := time.Now()
	rep := &report{
		Conch: o.conch, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		CPUs: runtime.NumCPU(), StartedAt: start.UTC().Truncate(time.Second),
	}
	rep.LoadBefore = loadAverage()
	r := &run{ctx: ctx, o: o}
	if out, err := exec.Command(o.conch, "version").Output(); err == nil {
		rep.Version = strings.TrimSpace(string(out))
	} else {
		r.fail("conch version: %v", err)
	}

	steps := []struct {
		name string
		run  func()
	}{
		{"start", func() { rep.Start = r.startCost() }},
		{"roundtrip", func() { rep.RoundTrip = r.roundTrip() }},
		{"capture", func() { rep.Capture = r.capture() }},
		{"big", func() { rep.Big = r.bigOutput() }},
		{"sessions", func() { rep.Sessions = r.sessions() }},
		{"sandbox", func() { rep.Sandbox = r.sandboxOverhead() }},
		{"parallel", func() { rep.Parallel = r.parallel() }},
	}
	for _, st := range steps {
		if !o.steps[st.name] || st.name == "big" && !o.big {
			continue
		}
		if ctx.Err() != nil {
			r.fail("interrupted")
			break
		}
		st.run()
	}
	rep.WallSeconds = time.Since(start).Seconds()
	rep.LoadAfter = loadAverage()
	rep.Failures = r.failures
	if rep.Failures == nil {
		rep.Failures = []string{}
	}
	rep.Notes = r.notes
	rep.Warnings = r.warnings
	rep.OK = len(rep.Failures) == 0
	return rep
}

// startServer starts `conch mcp` on a fresh temporary home, under timeBin
// -v when timeBin is not "", and connects to it. The benchmark measures
// the engine, not the per-agent exec rate limit (quotas.execPerSecond,
// 50/s by default): the home's config turns it off.
func startServer(ctx context.Context, bin, timeBin string) (*benchkit.Server, error) {
	return benchkit.StartServer(ctx, bin, benchkit.ServerOptions{Name: "conchbench", Config: `{"quotas":{"execPerSecond":0}}`, TimeBin: timeBin})
}

// sameShell is the environment that makes the gateway host run the
// baselines' shell, /bin/sh (it runs $SHELL).
var sameShell = []string{"SHELL=/bin/sh"}

// loadAverage returns the 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// excerpt shows the start of a result text with each run of ten or more
// identical characters written as three of them and "×<run length>", so a
// line of 100 'a's reads "aaa×100".
func excerpt(text string) string {
	var b strings.Builder
	rs := []rune(text)
	for i := 0; i < len(rs) && b.Len() < 240; {
		j := i
		for j < len(rs) && rs[j] == rs[i] {
			j++
		}
		if n := j - i; n >= 10 {
			fmt.Fprintf(&b, "%s×%d", strings.Repeat(string(rs[i]), 3), n)
		} else {
			b.WriteString(string(rs[i:j]))
		}
		i = j
		if i < len(rs) && b.Len() >= 240 {
			b.WriteString("…")
		}
	}
	return b.String()
}

// ---- 1. round trip ----

// roundTrip compares an exec tool call with spawning the same command
// directly. Calls are interleaved (conch, direct, conch, direct, …) so
// both sides see the same machine noise.
type roundTrip struct {
	N           int              `json:"n"`
	Warmup      int              `json:"warmup"`
	Conch       benchkit.Latency `json:"conchTrue"`
	Direct      benchkit.Latency `json:"directTrue"`
	MedianRatio float64          `json:"medianRatio"`
	EchoConch   benchkit.Latency `json:"conchEchoHi"`
	EchoDirect  benchkit.Latency `json:"directEchoHi"`
	EchoRatio   float64          `json:"echoMedianRatio"`
	// ConchSpawn is os/exec running `conch version`: the start-up cost of
	// the binary every supervisor is a copy of.
	ConchSpawn benchkit.Latency `json:"directConchVersion"`
	// NoLimits is exec "true" on a second gateway whose sessions have no
	// limits (quotas.session memoryBytes and pids 0), in the same turns:
	// LimitsRatio (Conch ÷ NoLimits) is what the default session limits
	// cost a call.
	NoLimits    benchkit.Latency `json:"conchTrueNoLimits"`
	LimitsRatio float64          `json:"limitsMedianRatio"`
	GoalRatio   float64          `json:"goalRatio"`
	GoalMet     bool             `json:"goalMet"`
}

func (r *run) roundTrip() *roundTrip {
	o := r.o
	progress("round trip: %d warm-up + %d measured calls of each kind", o.warmup, o.n)
	// conch runs the same shell as the baseline (the gateway runs
	// $SHELL: bash alone costs 1–3 ms more than dash to start here).
	s, err := benchkit.StartServer(r.ctx, o.conch, benchkit.ServerOptions{Name: "conchbench", Config: `{"quotas":{"execPerSecond":0}}`, Env: sameShell})
	if err != nil {
		r.fail("round trip: %v", err)
		return nil
	}
	defer s.Close()
	off, err := benchkit.StartServer(r.ctx, o.conch, benchkit.ServerOptions{Name: "conchbench-nolimits", Config: `{"quotas":{"execPerSecond":0,"session":{"memoryBytes":0,"pids":0,"cpuWeight":0}}}`, Env: sameShell})
	if err != nil {
		r.fail("round trip: server without session limits: %v", err)
		return nil
	}
	defer off.Close()

	call := func(s *benchkit.Server, command, want string) (time.Duration, error) {
		t0 := time.Now()
		res, err := s.Call(r.ctx, callLimit, "exec", map[string]any{"command": command})
		d := time.Since(t0)
		if err != nil {
			return d, err
		}
		if err := res.Completed("exec " + command); err != nil {
			return d, err
		}
		if want != "" && benchkit.StripNotices(res.Text) != want {
			return d, fmt.Errorf("exec %s: text %q, want %q", command, benchkit.Clip(res.Text, 200), want)
		}
		return d, nil
	}
	viaConch := func(command, want string) (time.Duration, error) { return call(s, command, want) }
	viaNoLimits := func(command, want string) (time.Duration, error) { return call(off, command, want) }
	direct := func(command, want string) (time.Duration, error) {
		t0 := time.Now()
		out, err := exec.CommandContext(r.ctx, "sh", "-c", command).Output()
		d := time.Since(t0)
		if err != nil {
			return d, fmt.Errorf("sh -c %s: %w", command, err)
		}
		if string(out) != want {
			return d, fmt.Errorf("sh -c %s: output %q, want %q", command, out, want)
		}
		return d, nil
	}

	// The supervisor conch starts per command is the conch binary itself,
	// so spawning `conch version` is a floor for what one exec can cost.
	spawnConch := func(string, string) (time.Duration, error) {
		t0 := time.Now()
		err := exec.CommandContext(r.ctx, o.conch, "version").Run()
		d := time.Since(t0)
		if err != nil {
			return d, fmt.Errorf("%s version: %w", o.conch, err)
		}
		return d, nil
	}

	var conchTrue, directTrue, conchEcho, directEcho, conchSpawn, noLimits []time.Duration
	for i := range o.warmup + o.n {
		steps := []struct {
			f       func(string, string) (time.Duration, error)
			command string
			want    string
			into    *[]time.Duration
		}{
			{viaConch, "true", "", &conchTrue},
			{direct, "true", "", &directTrue},
			{viaConch, "echo hi", "hi", &conchEcho},
			{direct, "echo hi", "hi\n", &directEcho},
			{spawnConch, "", "", &conchSpawn},
			{viaNoLimits, "true", "", &noLimits},
		}
		for _, st := range steps {
			d, err := st.f(st.command, st.want)
			if err != nil {
				r.fail("round trip: %v", err)
				return nil
			}
			if i >= o.warmup {
				*st.into = append(*st.into, d)
			}
		}
	}
	rt := &roundTrip{
		N: o.n, Warmup: o.warmup,
		Conch: benchkit.Summarize(conchTrue), Direct: benchkit.Summarize(directTrue),
		EchoConch: benchkit.Summarize(conchEcho), EchoDirect: benchkit.Summarize(directEcho),
		ConchSpawn: benchkit.Summarize(conchSpawn), NoLimits: benchkit.Summarize(noLimits),
		GoalRatio: goalRoundTripRatio,
	}
	rt.LimitsRatio = benchkit.Ratio(rt.Conch.MedianMs, rt.NoLimits.MedianMs)
	rt.MedianRatio = benchkit.Ratio(rt.Conch.MedianMs, rt.Direct.MedianMs)
	rt.EchoRatio = benchkit.Ratio(rt.EchoConch.MedianMs, rt.EchoDirect.MedianMs)
	rt.GoalMet = rt.MedianRatio <= goalRoundTripRatio
	return rt
}

// ---- 2. output capture throughput ----

// capture compares a foreground exec whose command prints bytes of
// 100-character lines with reading the same pipeline's stdout into
// io.Discard.
type capture struct {
	Bytes           int64   `json:"bytes"`
	Command         string  `json:"command"`
	ConchSeconds    float64 `json:"conchSeconds"`
	DirectSeconds   float64 `json:"directSeconds"`
	ConchMBps       float64 `json:"conchMBps"`
	DirectMBps      float64 `json:"directMBps"`
	TimeRatio       float64 `json:"timeRatio"`
	DirectBytesRead int64   `json:"directBytesRead"`
	ResultChars     int     `json:"resultChars"`
	ResultLimit     int     `json:"resultCharsLimit"`
	OmitMarker      bool    `json:"omitMarker"`
	RepeatMarker    bool    `json:"repeatMarker"`
	ResultExcerpt   string  `json:"resultExcerpt"`
	Polled          bool    `json:"polled"`
	Reps            int     `json:"reps"`
}

func pipeline(bytes int64) string {
	return fmt.Sprintf("head -c %d /dev/zero | tr '\\0' 'a' | fold -w 100", bytes)
}

func (r *run) capture() *capture {
	progress("capture: %d bytes through exec and through os/exec", r.o.bytes)
	s, err := startServer(r.ctx, r.o.conch, "")
	if err != nil {
		r.fail("capture: %v", err)
		return nil
	}
	defer s.Close()
	if err := r.warm(s); err != nil {
		r.fail("capture: %v", err)
		return nil
	}
	c, err := r.measureCapture(s, r.o.bytes, 120, r.o.reps)
	if err != nil {
		r.fail("capture: %v", err)
	}
	return c
}

// warm makes one exec call so the first measured call pays no start-up.
func (r *run) warm(s *benchkit.Server) error {
	res, err := s.Call(r.ctx, callLimit, "exec", map[string]any{"command": "true"})
	if err != nil {
		return err
	}
	return res.Completed("warm-up exec true")
}

// measureCapture runs the pipeline reps times directly and reps times
// through conch (alternating, direct first), with a yieldMs long enough
// to keep the exec in the foreground, and keeps the median time of each
// side. It returns what it measured even when conch's result is wrong.
func (r *run) measureCapture(s *benchkit.Server, bytes int64, timeoutSec, reps int) (*capture, error) {
	c := &capture{Bytes: bytes, Command: pipeline(bytes), ResultLimit: resultCharsLimit, Reps: reps}
	var directs, conchs []time.Duration
	for range reps {
		d, n, err := r.direct(c.Command)
		if err != nil {
			return nil, err
		}
		if n < bytes {
			return nil, fmt.Errorf("direct %s: read %d bytes, want at least %d", c.Command, n, bytes)
		}
		directs, c.DirectBytesRead = append(directs, d), n

		t0 := time.Now()
		res, polled, err := s.RunToEnd(r.ctx, time.Duration(timeoutSec+30)*time.Second, map[string]any{
			"command": c.Command, "timeout": timeoutSec, "yieldMs": 120000,
		})
		conchs = append(conchs, time.Since(t0))
		if err != nil {
			return nil, err
		}
		if polled && !c.Polled {
			r.note("the %d-byte exec outlived yieldMs=120000 and was polled to its end; its time includes the polls", bytes)
		}
		c.Polled = c.Polled || polled
		if err := r.checkCapture(c, res, polled); err != nil {
			return c, err
		}
	}
	direct, viaConch := benchkit.Median(directs), benchkit.Median(conchs)
	c.DirectSeconds, c.ConchSeconds = direct.Seconds(), viaConch.Seconds()
	c.DirectMBps, c.ConchMBps = benchkit.MBps(bytes, direct), benchkit.MBps(bytes, viaConch)
	c.TimeRatio = benchkit.Ratio(c.ConchSeconds, c.DirectSeconds)
	return c, nil
}

// direct runs command with sh -c, reading its stdout into io.Discard,
// and returns the time taken and the bytes read.
func (r *run) direct(command string) (time.Duration, int64, error) {
	cmd := exec.CommandContext(r.ctx, "sh", "-c", command)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	n, _ := io.Copy(io.Discard, out)
	err = cmd.Wait()
	d := time.Since(t0)
	if err != nil {
		return d, n, fmt.Errorf("direct %s: %w", command, err)
	}
	return d, n, nil
}

// checkCapture records the shape of one capture result in c and checks
// that it completed and came back bounded, with a marker saying what was
// left out.
func (r *run) checkCapture(c *capture, res benchkit.Result, polled bool) error {
	c.ResultChars = utf8.RuneCountInString(res.Text)
	c.OmitMarker = strings.Contains(res.Text, omitMarker) || (polled && strings.Contains(res.Text, pollSkipMarker))
	c.RepeatMarker = strings.Contains(res.Text, repeatMarker)
	c.ResultExcerpt = excerpt(res.Text)
	if err := res.Completed("exec " + c.Command); err != nil {
		return err
	}
	if c.ResultChars > resultCharsLimit {
		return fmt.Errorf("exec %s: result text has %d chars, want at most %d", c.Command, c.ResultChars, resultCharsLimit)
	}
	// Identical lines may fold into one "[previous line repeated N
	// times]" before any truncation is needed; either marker shows the
	// output was reduced rather than lost.
	if !c.OmitMarker && !c.RepeatMarker {
		return fmt.Errorf("exec %s: result text has neither the %q nor the %q marker: %s", c.Command, omitMarker, repeatMarker, benchkit.Clip(res.Text, 300))
	}
	r.lintCapture(c, res.Text)
	return nil
}

// omitMarkerRE matches render.OmitMarker's line.
var omitMarkerRE = regexp.MustCompile(`\[… (\d+) chars omitted; full output: process log sessionId=(\S+) since=(\d+) …\]`)

// lintCapture warns about a capture result that is bounded and marked but
// still looks wrong: an omitted-chars count of 0 although far more was
// printed than shown, or a line longer than the 100 characters fold
// writes (lines joined together).
func (r *run) lintCapture(c *capture, text string) {
	if m := omitMarkerRE.FindStringSubmatch(text); m != nil && m[1] == "0" && c.Bytes > int64(2*c.ResultChars) {
		r.warn(fmt.Sprint("zero-omitted ", c.Bytes), "%d-byte capture: the marker says \"0 chars omitted\" (since=%s) although the command printed %d bytes and the result shows %d chars (identical lines folded)",
			c.Bytes, m[3], c.Bytes, c.ResultChars)
	}
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if n := utf8.RuneCountInString(line); n > 100 && !strings.HasPrefix(line, "[") {
			r.warn(fmt.Sprint("long-line ", c.Bytes), "%d-byte capture: the result has a %d-char line although fold -w 100 prints at most 100 per line (lines joined, e.g. across the journal's dropped middle, with no dropped-bytes marker)",
				c.Bytes, n)
			break
		}
	}
}

// ---- 3. large output and memory ----

// bigOutput is a capture of -big-bytes with conch's and its supervisor's
// peak memory.
type bigOutput struct {
	capture
	// TimeBin is the GNU time conch ran under; "" when it was missing.
	TimeBin string `json:"timeBin"`
	// TimeMaxRSSMiB is time -v's "Maximum resident set size": the largest
	// of conch and every descendant it waited for (Linux wait4), so it
	// includes the supervisor. 0 without time.
	TimeMaxRSSMiB    float64 `json:"timeMaxRSSMiB"`
	ConchRSSBefore   float64 `json:"conchRSSBeforeMiB"`
	ConchPeakMiB     float64 `json:"conchPeakMiB"`
	ConchGrowthMiB   float64 `json:"conchGrowthMiB"`
	SupervisorPeak   float64 `json:"supervisorPeakMiB"`
	SupervisorsSeen  int     `json:"supervisorsSeen"`
	GoalGrowthMiB    float64 `json:"goalGrowthMiB"`
	GoalMet          bool    `json:"goalMet"`
	SupervisorSample string  `json:"supervisorSample"`
}

func (r *run) bigOutput() (res *bigOutput) {
	o := r.o
	timeBin := o.timeBin
	if timeBin != "" {
		if _, err := exec.LookPath(timeBin); err != nil {
			r.note("%s not found (Debian/Ubuntu: apt-get install time); conch's peak RSS comes from /proc VmHWM only", timeBin)
			timeBin = ""
		}
	}
	progress("big output: %d bytes, conch under %q", o.bigBytes, timeBin)
	s, err := startServer(r.ctx, o.conch, timeBin)
	if err != nil {
		r.fail("big output: %v", err)
		return nil
	}
	defer func() {
		s.Close()
		// time -v writes its report when conch exits.
		if timeBin != "" && res != nil {
			kb, err := timeMaxRSS(s.TimeReport)
			if err != nil {
				r.fail("big output: read %s -v report: %v", timeBin, err)
				return
			}
			res.TimeMaxRSSMiB = benchkit.MiB(kb)
		}
	}()
	if err := r.warm(s); err != nil {
		r.fail("big output: %v", err)
		return nil
	}
	pid, err := s.PID()
	if err != nil {
		r.fail("big output: %v", err)
		return nil
	}
	before, err := benchkit.StatusKB(pid, "VmRSS")
	if err != nil {
		r.fail("big output: %v", err)
		return nil
	}
	stopSampler := sampleSupervisors(s)
	c, capErr := r.measureCapture(s, o.bigBytes, 600, 1)
	supPeaks := stopSampler()
	peak, peakErr := benchkit.StatusKB(pid, "VmHWM")
	if capErr != nil {
		r.fail("big output: %v", capErr)
	}
	if peakErr != nil {
		r.fail("big output: conch mcp peak RSS: %v", peakErr)
		return nil
	}
	if c == nil {
		return nil
	}
	b := &bigOutput{capture: *c, TimeBin: timeBin, GoalGrowthMiB: goalGrowthMiB, SupervisorSample: supervisorSampleGap.String()}
	b.ConchRSSBefore, b.ConchPeakMiB = benchkit.MiB(before), benchkit.MiB(peak)
	b.ConchGrowthMiB = benchkit.MiB(peak - before)
	for _, kb := range supPeaks {
		b.SupervisorPeak = max(b.SupervisorPeak, benchkit.MiB(kb))
	}
	b.SupervisorsSeen = len(supPeaks)
	if b.SupervisorsSeen == 0 {
		r.note("no supervisor was seen while the big command ran; its peak RSS is unknown")
	}
	b.GoalMet = b.ConchGrowthMiB < goalGrowthMiB
	return b
}

// sampleSupervisors reads the VmHWM of s's supervisors every
// supervisorSampleGap until the returned function is called; that
// function returns the highest value seen per supervisor pid, in kB.
func sampleSupervisors(s *benchkit.Server) func() map[int]int64 {
	peaks := map[int]int64{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(supervisorSampleGap)
		defer t.Stop()
		for {
			for _, p := range s.Supervisors() {
				if kb, err := benchkit.StatusKB(p.PID, "VmHWM"); err == nil && kb > peaks[p.PID] {
					peaks[p.PID] = kb
				}
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() map[int]int64 {
		close(stop)
		<-done
		return peaks
	}
}

// timeMaxRSS reads "Maximum resident set size (kbytes): N" from a GNU
// time -v report.
func timeMaxRSS(report string) (int64, error) {
	for line := range strings.Lines(report) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && name == "Maximum resident set size (kbytes)" {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no \"Maximum resident set size\" line")
}

// ---- 4. concurrent background sessions ----

// sessions starts many background sessions at once, measures memory
// while they sleep, then checks that each one's output arrived whole.
type sessions struct {
	Sessions        int     `json:"sessions"`
	LinesPerSession int     `json:"linesPerSession"`
	StartSeconds    float64 `json:"startSeconds"`
	WallSeconds     float64 `json:"wallSeconds"`
	LinesExpected   int     `json:"linesExpected"`
	LinesLost       int     `json:"linesLost"`
	LinesDuplicated int     `json:"linesDuplicated"`
	LinesUnexpected int     `json:"linesUnexpected"`
	OutOfOrder      int     `json:"sessionsOutOfOrder"`
	PollLinesLost   int     `json:"pollLinesLost"`
	NotCompleted    int     `json:"sessionsNotCompleted"`
	// SessionsSampled is how many sessions were alive in the memory
	// sample kept: the one, taken every 250ms while the sessions started
	// and once after, with the most of them; SupervisorsSampled is how
	// many supervisor processes served them (one host serves many).
	SessionsSampled    int     `json:"sessionsSampled"`
	SupervisorsSampled int     `json:"supervisorsSampled"`
	SampledAtSeconds   float64 `json:"sampledAtSeconds"`
	SupervisorUSSMiB   float64 `json:"supervisorUSSTotalMiB"`
	PerSessionMiB      float64 `json:"perSessionMiB"`
	ConchUSSMiB        float64 `json:"conchUSSMiB"`
	GoalPerSessionMiB  float64 `json:"goalPerSessionMiB"`
	GoalMet            bool    `json:"goalMet"`
}

// sessionCommand is the command of background session id (a number, or
// "$ID" for the report).
func sessionCommand(id string, lines int) string {
	return fmt.Sprintf("for i in $(seq 1 %d); do echo s%s-$i; sleep 0.1; done", lines, id)
}

func (r *run) sessions() *sessions {
	o := r.o
	progress("sessions: %d background sessions of %d lines", o.sessions, o.lines)
	s, err := startServer(r.ctx, o.conch, "")
	if err != nil {
		r.fail("sessions: %v", err)
		return nil
	}
	defer func() {
		if n := s.Close(); n > 0 {
			r.note("%d supervisors were still running after the sessions step and were killed", n)
		}
	}()
	if err := r.warm(s); err != nil {
		r.fail("sessions: %v", err)
		return nil
	}
	res := &sessions{Sessions: o.sessions, LinesPerSession: o.lines, LinesExpected: o.sessions * o.lines, GoalPerSessionMiB: goalPerSessionMiB}

	// Start every session, o.workers calls at a time, sampling memory
	// meanwhile: sessions may end before the last one starts on a busy
	// machine, so the sample with the most live supervisors is kept.
	ids := make([]string, o.sessions)
	t0 := time.Now()
	stopSampler := sampleUSS(s, t0)
	var startErr error
	var mu sync.Mutex // guards startErr, problems and the line counts in res
	forEach(o.sessions, o.workers, func(i int) {
		out, err := s.Call(r.ctx, callLimit, "exec", map[string]any{"command": sessionCommand(strconv.Itoa(i), o.lines), "background": true})
		if err == nil && (out.IsError || out.Str("status") != "running" || out.Str("sessionId") == "") {
			err = fmt.Errorf("exec background session %d: status %q: %s", i, out.Str("status"), benchkit.Clip(out.Text, 300))
		}
		if err != nil {
			mu.Lock()
			startErr = cmp.Or(startErr, err)
			mu.Unlock()
			return
		}
		ids[i] = out.Str("sessionId")
	})
	res.StartSeconds = time.Since(t0).Seconds()
	m := stopSampler()
	if startErr != nil {
		r.fail("sessions: %v", startErr)
		return res
	}
	if m.err != nil {
		r.fail("sessions: %v", m.err)
	}
	res.SessionsSampled, res.SupervisorsSampled, res.SampledAtSeconds = m.sessions, m.supervisors, m.at.Seconds()
	res.SupervisorUSSMiB, res.ConchUSSMiB = benchkit.MiB(m.supervisorKB), benchkit.MiB(m.conchKB)
	res.PerSessionMiB = benchkit.Ratio(res.SupervisorUSSMiB, float64(res.SessionsSampled))
	res.GoalMet = res.SessionsSampled > 0 && res.PerSessionMiB <= goalPerSessionMiB
	if res.SessionsSampled < o.sessions {
		r.note("at most %d of %d sessions were alive at once (sessions ended while later ones were still starting); per-session memory divides by %d",
			res.SessionsSampled, o.sessions, res.SessionsSampled)
	}

	// Wait for each session to end and check its output.
	var problems []string
	forEach(o.sessions, verifyWorkers, func(i int) {
		v, err := r.verifySession(s, ids[i], i)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			problems = append(problems, err.Error())
			return
		}
		res.LinesLost += v.lost
		res.LinesDuplicated += v.dup
		res.LinesUnexpected += v.unexpected
		res.PollLinesLost += v.pollLost
		if !v.inOrder {
			res.OutOfOrder++
		}
		if !v.completed {
			res.NotCompleted++
		}
		if v.problem != "" {
			problems = append(problems, v.problem)
		}
	})
	res.WallSeconds = time.Since(t0).Seconds()
	for i, p := range problems {
		if i == 5 {
			r.fail("sessions: … and %d more problems", len(problems)-5)
			break
		}
		r.fail("sessions: %s", p)
	}
	return res
}

// ussSample is the memory of conch and its supervisors at one moment.
type ussSample struct {
	at           time.Duration // since the first start
	sessions     int           // live sessions (main processes)
	supervisors  int           // live supervisors measured
	supervisorKB int64         // their USS, summed
	conchKB      int64         // conch mcp's USS
	err          error
}

// sampleUSS measures s's memory every ussSampleGap until the returned
// function is called; that function takes one last sample and returns
// the one with the most live sessions (the latest of equals).
func sampleUSS(s *benchkit.Server, t0 time.Time) func() ussSample {
	var best ussSample
	take := func() {
		m := ussSample{at: time.Since(t0)}
		for _, p := range s.Supervisors() {
			if kb, err := benchkit.USSKB(p.PID); err == nil {
				m.supervisorKB += kb
				m.supervisors++
			}
		}
		m.sessions = s.Sessions()
		pid, err := s.PID()
		if err == nil {
			m.conchKB, err = benchkit.USSKB(pid)
		}
		if err != nil {
			m.err = fmt.Errorf("conch USS: %w", err)
		}
		if m.sessions >= best.sessions {
			best = m
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ussSampleGap)
		defer t.Stop()
		for {
			select {
			case <-stop:
				take()
				return
			case <-t.C:
				take()
			}
		}
	}()
	return func() ussSample {
		close(stop)
		<-done
		return best
	}
}

// verdict is the check of one session's output.
type verdict struct {
	lost, dup, unexpected, pollLost int
	inOrder, completed              bool
	problem                         string
}

// verifySession polls session id until it ends, collecting the polled
// lines, then reads its whole log; both must hold s<n>-1 … s<n>-lines
// exactly once and in order.
func (r *run) verifySession(s *benchkit.Server, id string, n int) (verdict, error) {
	var v verdict
	want := make([]string, r.o.lines)
	for i := range want {
		want[i] = fmt.Sprintf("s%d-%d", n, i+1)
	}
	var polled []string
	status := "running"
	deadline := time.Now().Add(3 * time.Minute)
	for status == "running" {
		if time.Now().After(deadline) {
			return v, fmt.Errorf("session %s (s%d) still running after 3m", id, n)
		}
		p, err := s.Call(r.ctx, 90*time.Second, "process", map[string]any{"action": "poll", "sessionId": id, "timeout": 60000})
		if err != nil {
			return v, err
		}
		if p.IsError {
			return v, fmt.Errorf("poll %s: %s", id, benchkit.Clip(p.Text, 300))
		}
		status = p.Str("status")
		text := benchkit.StripNotices(p.Text)
		if i := strings.LastIndex(text, "\n\n"); i >= 0 {
			text = text[:i]
		}
		if text != "(no new output)" && text != "" {
			polled = append(polled, strings.Split(text, "\n")...)
		}
	}
	v.completed = status == "completed"
	l, err := s.Call(r.ctx, callLimit, "process", map[string]any{"action": "log", "sessionId": id, "offset": 0, "limit": 2*r.o.lines + 100})
	if err != nil {
		return v, err
	}
	if l.IsError {
		return v, fmt.Errorf("log %s: %s", id, benchkit.Clip(l.Text, 300))
	}
	var logged []string
	if text := benchkit.StripNotices(l.Text); text != "(no output recorded)" && text != "" {
		logged = strings.Split(text, "\n")
	}
	v.lost, v.dup, v.unexpected, v.inOrder = compareLines(want, logged)
	v.pollLost, _, _, _ = compareLines(want, polled)
	switch {
	case !v.completed:
		v.problem = fmt.Sprintf("session %s (s%d) ended %q", id, n, status)
	case v.lost+v.dup+v.unexpected > 0 || !v.inOrder:
		v.problem = fmt.Sprintf("session %s (s%d) log: %d lost, %d duplicated, %d unexpected, in order %v: %s",
			id, n, v.lost, v.dup, v.unexpected, v.inOrder, benchkit.Clip(strings.Join(logged, "|"), 200))
	case !slices.Equal(polled, want):
		v.problem = fmt.Sprintf("session %s (s%d) polls returned %d lines (%d lost), not the %d in order: %s",
			id, n, len(polled), v.pollLost, len(want), benchkit.Clip(strings.Join(polled, "|"), 200))
	}
	return v, nil
}

// compareLines counts the wanted lines missing from got, the extra
// copies of wanted lines, the lines nobody wanted, and whether got is
// exactly want.
func compareLines(want, got []string) (lost, dup, unexpected int, inOrder bool) {
	count := map[string]int{}
	for _, g := range got {
		count[g]++
	}
	seen := 0
	for _, w := range want {
		switch c := count[w]; {
		case c == 0:
			lost++
		case c > 1:
			dup += c - 1
		}
		seen += count[w]
	}
	return lost, dup, len(got) - seen, slices.Equal(got, want)
}

// forEach calls f(0..n-1) from workers goroutines and waits for them.
func forEach(n, workers int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
