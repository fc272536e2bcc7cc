package policy

import "testing"

func TestExplainSpecExample(t *testing.T) {
	req := stdRequest("git status; curl -s https://example.com | head -n 5")
	req.Allowlist = []AllowEntry{
		{Pattern: "/usr/bin/echo", Source: "agents.*.allowlist[0]"},
		{Pattern: "~/bin/*", Source: "agents.main.allowlist[1]"},
		{Pattern: "/usr/bin/git", Source: "agents.main.allowlist[2]"},
	}
	d := Evaluate(req)
	header := "agent main · host gateway · security allowlist (config allowlist, file —) · ask on-miss (config on-miss, file on-miss) · askFallback deny"
	want := header + `
parse: ok
chain
├─ [1] git status
│     exe /usr/bin/git                     ✓ allowlist   rule agents.main.allowlist[2] "/usr/bin/git"
└─ [2] pipeline
    ├─ [2.1] curl -s https://example.com
    │     exe /usr/bin/curl                ✗ miss        no allowlist entry; not a safe bin
    └─ [2.2] head -n 5
          exe /usr/bin/head                ✓ safeBins    profile head (value flag -n)
verdict: approval required (ask=on-miss; miss in 2.1)
pinned: —
allow-always would persist: /usr/bin/curl
`
	if got := d.Explain(header); got != want {
		t.Errorf("explain:\n%s\nwant:\n%s", got, want)
	}
	if d.Outcome != OutcomePrompt || d.Reason != "allowlist miss: /usr/bin/curl" {
		t.Errorf("outcome %q reason %q", d.Outcome, d.Reason)
	}
}
