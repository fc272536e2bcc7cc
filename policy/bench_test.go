package policy

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchAllowlist is a 20-entry allowlist: globs, literals, home patterns
// and bare names, with git near the end.
var benchAllowlist = func() []AllowEntry {
	patterns := []string{
		"/usr/bin/echo", "/usr/local/bin/rg", "~/bin/*", "/opt/homebrew/bin/*", "/usr/bin/python3",
		"/usr/bin/node", "~/Projects/**/bin/rg", "/usr/bin/make", "/usr/bin/go", "rg",
		"/usr/local/go/bin/go", "/usr/bin/cargo", "/usr/bin/ls", "/usr/bin/cat", "/usr/bin/find",
		"/usr/bin/git", "/usr/bin/jq", "/usr/bin/*++", "/opt/**/bin/tool", "/usr/bin/npm",
	}
	out := make([]AllowEntry, len(patterns))
	for i, p := range patterns {
		out[i] = AllowEntry{Pattern: p, Source: "agents.main.allowlist[" + itoa(i) + "]"}
	}
	return out
}()

// BenchmarkEvaluatePipeline measures one typical decision on the real
// filesystem: parse, resolve three executables on PATH, match a 20-entry
// allowlist, check two safe-bin profiles and pin. It reports the median.
func BenchmarkEvaluatePipeline(b *testing.B) {
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		b.Skip("no /usr/bin/git")
	}
	req := Request{
		Command:   "git status | head -n 5 | wc -l",
		Security:  SecurityAllowlist,
		Ask:       AskOnMiss,
		Allowlist: benchAllowlist,
		Env:       Env{PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", Cwd: "/tmp", Home: "/root"},
	}
	if d := Evaluate(req); d.Outcome != OutcomeRun {
		b.Fatalf("outcome %s %s", d.Outcome, d.Reason)
	}
	samples := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		Evaluate(req)
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "median-ns")
}

// BenchmarkAnalyze measures the parse and shape check alone.
func BenchmarkAnalyze(b *testing.B) {
	for range b.N {
		Analyze("git status | head -n 5 | wc -l")
	}
}

// BenchmarkEvaluateSegmentCap measures the refusal of a command of 2,000
// segments (beyond MaxSegments): the analysis fails before any executable
// is resolved.
func BenchmarkEvaluateSegmentCap(b *testing.B) {
	req := Request{
		Command:  "echo hi" + strings.Repeat(" | cat", 2000),
		Security: SecurityAllowlist, Ask: AskOff,
		Env: Env{PATH: "/usr/bin:/bin", Cwd: "/tmp", Home: "/root"},
	}
	if d := Evaluate(req); d.Outcome == OutcomeRun || !strings.HasPrefix(d.Analysis.Reason, "too many segments") {
		b.Fatalf("%s: %s", d.Outcome, d.Analysis.Reason)
	}
	for b.Loop() {
		Evaluate(req)
	}
}
