package policy

import (
	"testing"
)

// FuzzEvaluate asserts, for any command text: Evaluate never panics; a
// command that fails the analysis never runs in allowlist mode; the
// analysis in the decision is Analyze's; and a pinned command re-analyses.
func FuzzEvaluate(f *testing.F) {
	for _, c := range bypassCorpus {
		f.Add(c)
	}
	for _, c := range mustRun {
		f.Add(c)
	}
	f.Add("bash -lc 'git status | head -n 5' && xargs -0 git show")
	f.Add("nice -n 5 timeout 5 env git log | sort -k2 | uniq -c")
	f.Add("cat <<'EOF' | wc -l\nx\nEOF")
	fs := stdFS()
	env := fs.env(stdPATH, "/home/u/proj", "/home/u")
	allowlists := [][]AllowEntry{
		{{Pattern: "/usr/bin/echo"}, {Pattern: "/usr/bin/git"}},
		{{Pattern: "*"}},
		{{Pattern: "/usr/**"}},
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		a := Analyze(cmd)
		for _, allow := range allowlists {
			for _, ask := range []Ask{AskOff, AskOnMiss} {
				for _, strict := range []bool{false, true} {
					d := Evaluate(Request{
						Command: cmd, Security: SecurityAllowlist, Ask: ask,
						Allowlist: allow, StrictInlineEval: strict, Env: env,
						SafeBins: allProfiled,
					})
					if d.Analysis.OK != a.OK || d.Analysis.Reason != a.Reason {
						t.Fatalf("%q: Evaluate analysis %v %q, Analyze %v %q", cmd, d.Analysis.OK, d.Analysis.Reason, a.OK, a.Reason)
					}
					if !a.OK && d.Outcome == OutcomeRun {
						t.Fatalf("%q: failed analysis (%s) but runs", cmd, a.Reason)
					}
					if d.Outcome == OutcomeRun && d.Pinned == "" {
						t.Fatalf("%q: runs in allowlist mode without a pinned command", cmd)
					}
					if d.Pinned != "" {
						if p := Analyze(d.Pinned); !p.OK {
							t.Fatalf("%q: pinned %q does not re-analyse: %s", cmd, d.Pinned, p.Reason)
						}
						// The pinned command is auto-allowed too: pinning
						// only makes paths absolute and quotes literals.
						d2 := Evaluate(Request{
							Command: d.Pinned, Security: SecurityAllowlist, Ask: ask,
							Allowlist: allow, StrictInlineEval: strict, Env: env,
							SafeBins: allProfiled,
						})
						if d2.Outcome != OutcomeRun {
							t.Fatalf("%q: pinned %q: %s %s", cmd, d.Pinned, d2.Outcome, d2.Reason)
						}
					}
					_ = d.Explain("h")
				}
			}
		}
		// full mode never fails either
		_ = Evaluate(Request{Command: cmd, Security: SecurityFull, Env: env}).Explain("")
	})
}
