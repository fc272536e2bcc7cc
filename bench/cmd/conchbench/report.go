package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

func goal(met bool) string {
	if met {
		return "goal met"
	}
	return "goal NOT met"
}

// printReport writes the human-readable report.
func printReport(w io.Writer, rep *report, o options) {
	fmt.Fprintf(w, "conchbench: %s\n", rep.Version)
	fmt.Fprintf(w, "  binary %s; bench built with %s on %s, %d CPUs; %s\n", rep.Conch, rep.GoVersion, rep.Platform, rep.CPUs, rep.StartedAt.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "  load average (1/5/15 min) %s at start, %s at end\n", rep.LoadBefore, rep.LoadAfter)
	fmt.Fprintf(w, "  every ratio is conch ÷ a baseline measured in this run (>1: conch slower or larger);\n")
	fmt.Fprintf(w, "  absolute times are for context only.\n")

	if sc := rep.Start; sc != nil {
		printStart(w, sc)
	}

	if rt := rep.RoundTrip; rt != nil {
		fmt.Fprintf(w, "\n1. Round trip: exec tool call vs os/exec spawning sh -c (N=%d each after %d warm-up, interleaved)\n", rt.N, rt.Warmup)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\tmedian\tp90\tp99\tmin\tmax\t\n")
		row := func(name string, l benchkit.Latency) {
			fmt.Fprintf(tw, "%s\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f ms\t\n", name, l.MedianMs, l.P90Ms, l.P99Ms, l.MinMs, l.MaxMs)
		}
		row("   conch exec {command:\"true\"}", rt.Conch)
		row("   sh -c true (os/exec)", rt.Direct)
		row("   conch exec {command:\"echo hi\"}", rt.EchoConch)
		row("   sh -c 'echo hi' (os/exec)", rt.EchoDirect)
		row("   conch version (os/exec, start-up floor)", rt.ConchSpawn)
		row("   conch exec {command:\"true\"}, no session limits", rt.NoLimits)
		tw.Flush()
		fmt.Fprintf(w, "   median ratio, true:    %.2fx  (goal ≤ %.0fx: %s)\n", rt.MedianRatio, rt.GoalRatio, goal(rt.GoalMet))
		fmt.Fprintf(w, "   median ratio, echo hi: %.2fx\n", rt.EchoRatio)
		fmt.Fprintf(w, "   median ratio, true with the default session limits ÷ without: %.2fx\n", rt.LimitsRatio)
	}

	if c := rep.Capture; c != nil {
		fmt.Fprintf(w, "\n2. Output capture: %s\n", c.Command)
		printCapture(w, c)
	}

	if b := rep.Big; b != nil {
		fmt.Fprintf(w, "\n3. Large output + memory: %s\n", b.Command)
		printCapture(w, &b.capture)
		fmt.Fprintf(w, "   conch mcp RSS before %.1f MiB, peak (VmHWM) %.1f MiB: grew %.1f MiB  (goal < %.0f MiB: %s)\n",
			b.ConchRSSBefore, b.ConchPeakMiB, b.ConchGrowthMiB, b.GoalGrowthMiB, goal(b.GoalMet))
		fmt.Fprintf(w, "   supervisor peak (VmHWM, sampled every %s): %.1f MiB (%d supervisor(s) seen)\n", b.SupervisorSample, b.SupervisorPeak, b.SupervisorsSeen)
		if b.TimeBin != "" {
			fmt.Fprintf(w, "   %s -v max RSS: %.1f MiB (largest of conch and the children it reaped, supervisor included)\n", b.TimeBin, b.TimeMaxRSSMiB)
		} else {
			fmt.Fprintf(w, "   /usr/bin/time not available: conch's peak is from /proc VmHWM only\n")
		}
	} else if !o.big && o.steps["big"] {
		fmt.Fprintf(w, "\n3. Large output + memory: skipped (pass -big; bench/run.sh does unless BENCH_QUICK=1)\n")
	}

	if s := rep.Sessions; s != nil {
		fmt.Fprintf(w, "\n4. Concurrent background sessions: %d × `%s`\n", s.Sessions, sessionCommand("$ID", s.LinesPerSession))
		fmt.Fprintf(w, "   all %d started in %.2f s; all ended and verified after %.2f s (ideal ≈ %.1f s of sleeps)\n",
			s.Sessions, s.StartSeconds, s.WallSeconds, 0.1*float64(s.LinesPerSession))
		fmt.Fprintf(w, "   lines: %d expected, %d lost, %d duplicated, %d unexpected; %d session(s) out of order; %d lost in polls; %d not completed\n",
			s.LinesExpected, s.LinesLost, s.LinesDuplicated, s.LinesUnexpected, s.OutOfOrder, s.PollLinesLost, s.NotCompleted)
		fmt.Fprintf(w, "   memory %.1f s after the first start, %d sessions alive:\n", s.SampledAtSeconds, s.SessionsSampled)
		fmt.Fprintf(w, "     supervisors' USS total %.1f MiB (%d processes) for %d live sessions = %.2f MiB per idle session  (goal ≤ %.0f MiB: %s)\n",
			s.SupervisorUSSMiB, s.SupervisorsSampled, s.SessionsSampled, s.PerSessionMiB, s.GoalPerSessionMiB, goal(s.GoalMet))
		fmt.Fprintf(w, "     conch mcp USS %.1f MiB\n", s.ConchUSSMiB)
	}

	if so := rep.Sandbox; so != nil {
		printSandbox(w, so)
	}

	if pr := rep.Parallel; pr != nil {
		printParallel(w, pr)
	}

	if len(rep.Notes) > 0 {
		fmt.Fprintf(w, "\nNotes:\n")
		for _, n := range rep.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	if len(rep.Warnings) > 0 {
		fmt.Fprintf(w, "\nWarnings (conch output that looks wrong; not counted as failures):\n")
		for _, n := range rep.Warnings {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	fmt.Fprintf(w, "\nTotal wall time %.1f s.\n", rep.WallSeconds)
	if rep.OK {
		fmt.Fprintf(w, "Result: conch behaved correctly in every step.\n")
		return
	}
	fmt.Fprintf(w, "Result: FAILED — conch misbehaved:\n")
	for _, f := range rep.Failures {
		fmt.Fprintf(w, "  - %s\n", f)
	}
}

func printCapture(w io.Writer, c *capture) {
	fmt.Fprintf(w, "   conch exec:     %7.2f s  %8.1f MB/s  (result text %d chars, limit %d; omitted-chars marker %v, repeated-line marker %v)\n",
		c.ConchSeconds, c.ConchMBps, c.ResultChars, c.ResultLimit, c.OmitMarker, c.RepeatMarker)
	fmt.Fprintf(w, "   os/exec→Discard: %6.2f s  %8.1f MB/s  (%d bytes read)\n", c.DirectSeconds, c.DirectMBps, c.DirectBytesRead)
	fmt.Fprintf(w, "   result text starts: %q\n", c.ResultExcerpt)
	fmt.Fprintf(w, "   time ratio %.2fx (MB = 10^6 bytes of command output before fold's newlines)\n", c.TimeRatio)
}
