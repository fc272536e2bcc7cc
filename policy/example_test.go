package policy_test

import (
	"fmt"

	"github.com/conchsh/conch/policy"
)

func ExampleAnalyze() {
	a := policy.Analyze("git status && curl -s https://example.com | head -n 5")
	for _, p := range a.Parts {
		for _, s := range p.Segments {
			fmt.Printf("%q %q\n", p.Op, s.Argv)
		}
	}
	b := policy.Analyze("git status > out")
	fmt.Println(b.OK, b.Reason, b.Pos)
	// Output:
	// "" ["git" "status"]
	// "&&" ["curl" "-s" "https://example.com"]
	// "&&" ["head" "-n" "5"]
	// false unsupported shell construct: redirection (>) 1:12
}

func ExampleEvaluate() {
	d := policy.Evaluate(policy.Request{
		Command:   "git status; echo $(id)",
		Security:  policy.SecurityAllowlist,
		Ask:       policy.AskOnMiss,
		Allowlist: []policy.AllowEntry{{Pattern: "/usr/bin/*"}},
		Env:       policy.Env{PATH: "/usr/bin:/bin"},
	})
	fmt.Println(d.Outcome)
	fmt.Println(d.Reason)
	fmt.Print(d.Explain("agent main · host gateway"))
	// Output:
	// prompt
	// analysis failed: unsupported shell construct: command substitution ($(…))
	// agent main · host gateway
	// parse: failed — unsupported shell construct: command substitution ($(…)) at 1:18
	// verdict: approval required (ask=on-miss; analysis failed)
	// pinned: —
	// allow-always would persist: —
}

func ExampleMatchGlob() {
	fmt.Println(policy.MatchGlob("/opt/**/rg", "/opt/homebrew/bin/rg", "/home/u"))
	fmt.Println(policy.MatchGlob("/opt/*/rg", "/opt/homebrew/bin/rg", "/home/u"))
	fmt.Println(policy.MatchGlob("~/bin/*", "/home/u/bin/tool", "/home/u"))
	fmt.Println(policy.MatchGlob("rg", "/usr/bin/rg", "/home/u"))
	// Output:
	// true
	// false
	// true
	// false
}
