package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

// goalWaitMs: process wait until=regex should return within this many ms
// of the matching line being written.
const goalWaitMs = 50

// waitStep is step 1: regex wait latency.
type waitStep struct {
	// Live: the session keeps running after the line; Exit: it exits right
	// after the line; Direct: os/exec reading the same script's stdout
	// (the floor: fork of date, pipe, scheduling).
	Live       benchkit.Latency `json:"live"`
	Exit       benchkit.Latency `json:"exit"`
	Direct     benchkit.Latency `json:"direct"`
	LiveGoal   bool             `json:"liveGoalMet"` // p99 of Live within goalWaitMs
	ExitGoal   bool             `json:"exitGoalMet"`
	WithinGoal int              `json:"liveWithinGoal"` // repetitions of Live within goalWaitMs
	// ElapsedLive is the wait's own elapsedMs (from the wait call's start).
	ElapsedLive benchkit.Latency `json:"elapsedLive"`
	Command     string           `json:"command"`
	// The raw figures, in run order (ms).
	LiveMs   []float64 `json:"liveMs"`
	ExitMs   []float64 `json:"exitMs"`
	DirectMs []float64 `json:"directMs"`
}

// markScript prints `MARK <unix ns>` after delay; the ns is taken by date
// just before the line is written (a fork earlier, so the figures err on
// the slow side). With tailSleep > 0 the process stays alive afterwards.
func markScript(delay time.Duration, tailSleep int) string {
	s := fmt.Sprintf(`sleep %.3f; echo "MARK $(date +%%s%%N)"`, delay.Seconds())
	if tailSleep > 0 {
		s += fmt.Sprintf("; sleep %d", tailSleep)
	}
	return s
}

// markNs parses the ns out of a `MARK <ns>` line.
func markNs(line string) (int64, error) {
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "MARK" {
		return 0, fmt.Errorf("not a MARK line: %q", line)
	}
	return strconv.ParseInt(f[1], 10, 64)
}

func (r *run) waitLatency() *waitStep {
	s, err := startServer(r.ctx, r.o.conch, `{"quotas":{"execPerSecond":0}}`)
	if err != nil {
		r.fail("wait: %v", err)
		return nil
	}
	defer func() {
		if n := s.Close(); n > 0 {
			r.note("wait: killed %d supervisor(s) left running", n)
		}
	}()
	step := &waitStep{Command: markScript(537*time.Millisecond, 30) + "   (delay random in [200,800) ms)"}
	var live, exit, direct, elapsed []time.Duration
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	// One warm-up round trip so the first measured exec does not pay for
	// the login-shell PATH probe.
	if _, err := s.Call(r.ctx, time.Minute, "exec", map[string]any{"command": "true"}); err != nil {
		r.fail("wait: warm-up: %v", err)
		return nil
	}
	for i := 0; i < r.o.waitN; i++ {
		delay := 200*time.Millisecond + time.Duration(rng.Int64N(int64(600*time.Millisecond)))
		if d, el, err := r.conchWait(s, markScript(delay, 30)); err != nil {
			r.fail("wait live #%d: %v", i, err)
		} else {
			live, elapsed = append(live, d), append(elapsed, el)
		}
		delay = 200*time.Millisecond + time.Duration(rng.Int64N(int64(600*time.Millisecond)))
		if d, _, err := r.conchWait(s, markScript(delay, 0)); err != nil {
			r.fail("wait exit #%d: %v", i, err)
		} else {
			exit = append(exit, d)
		}
		delay = 200*time.Millisecond + time.Duration(rng.Int64N(int64(600*time.Millisecond)))
		if d, err := directWait(r.ctx, markScript(delay, 0)); err != nil {
			r.fail("wait direct #%d: %v", i, err)
		} else {
			direct = append(direct, d)
		}
	}
	step.Live, step.Exit, step.Direct, step.ElapsedLive = benchkit.Summarize(live), benchkit.Summarize(exit), benchkit.Summarize(direct), benchkit.Summarize(elapsed)
	for _, d := range live {
		step.LiveMs = append(step.LiveMs, benchkit.Ms(d))
	}
	for _, d := range exit {
		step.ExitMs = append(step.ExitMs, benchkit.Ms(d))
	}
	for _, d := range direct {
		step.DirectMs = append(step.DirectMs, benchkit.Ms(d))
	}
	step.LiveGoal = len(live) > 0 && step.Live.MaxMs <= goalWaitMs
	step.ExitGoal = len(exit) > 0 && step.Exit.MaxMs <= goalWaitMs
	for _, d := range live {
		if benchkit.Ms(d) <= goalWaitMs {
			step.WithinGoal++
		}
	}
	return step
}

// conchWait starts command in the background, waits for MARK with
// process wait until=regex at once, and returns (arrival of the wait
// result − the ns in the line) and the wait's elapsedMs.
func (r *run) conchWait(s *benchkit.Server, command string) (time.Duration, time.Duration, error) {
	e, err := s.Call(r.ctx, time.Minute, "exec", map[string]any{"command": command, "background": true})
	if err != nil {
		return 0, 0, err
	}
	id := e.Str("sessionId")
	if e.IsError || id == "" {
		return 0, 0, fmt.Errorf("exec: %s", benchkit.Clip(e.Text, 300))
	}
	defer s.Call(r.ctx, time.Minute, "process", map[string]any{"action": "remove", "sessionId": id})
	w, err := s.Call(r.ctx, time.Minute, "process", map[string]any{
		"action": "wait", "sessionId": id, "until": "regex", "pattern": "MARK", "timeout": 10000,
	})
	arrived := time.Now().UnixNano()
	if err != nil {
		return 0, 0, err
	}
	if w.Str("outcome") != "met" || w.Str("fired") != "regex" {
		return 0, 0, fmt.Errorf("wait: outcome %q fired %q: %s", w.Str("outcome"), w.Str("fired"), benchkit.Clip(w.Text, 300))
	}
	m, _ := w.D["match"].(map[string]any)
	text, _ := m["text"].(string)
	ns, err := markNs(text)
	if err != nil {
		return 0, 0, err
	}
	return time.Duration(arrived - ns), time.Duration(w.Num("elapsedMs")) * time.Millisecond, nil
}

// directWait runs command with os/exec and returns (arrival of the MARK
// line on the pipe − the ns in it).
func directWait(ctx context.Context, command string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		arrived := time.Now().UnixNano()
		if ns, err := markNs(sc.Text()); err == nil {
			return time.Duration(arrived - ns), nil
		}
	}
	return 0, fmt.Errorf("no MARK line from %q", command)
}
