package policy

import (
	"strings"
	"testing"
)

// TestPowerShellNeverSatisfied: with Request.Shell = PowerShell, for
// commands the bash analysis allows (a "*" allowlist, safe bins, the
// PowerShell subexpressions bash reads as plain words) and commands it
// does not, under every security and ask: only security=full runs, deny
// denies, ask=off denies naming PowerShell, everything else prompts, and
// nothing is persisted. The same commands without Shell run where the
// analysis allows them, so the rule is what changes the outcome.
func TestPowerShellNeverSatisfied(t *testing.T) {
	cmds := []string{"ls", "echo hi", "echo @(Remove-Item -Recurse C:/x)", "echo {Remove-Item x}", "git status", "ls | head -1", "rm -rf /", "echo $(id)", "cat x > y"}
	for _, cmd := range cmds {
		for _, sec := range []Security{SecurityAllowlist, SecurityFull, SecurityDeny} {
			for _, ask := range []Ask{AskOnMiss, AskOff, AskAlways} {
				req := stdRequest(cmd)
				req.Allowlist = []AllowEntry{{Pattern: "*"}}
				req.Security, req.Ask = sec, ask
				bash := Evaluate(req)
				req.Shell = ShellPowerShell
				d := Evaluate(req)
				want := OutcomePrompt
				switch {
				case sec == SecurityDeny:
					want = OutcomeDeny
				case ask == AskAlways:
					want = OutcomePrompt
				case sec == SecurityFull:
					want = OutcomeRun
				case ask == AskOff:
					want = OutcomeDeny
				}
				if d.Outcome != want {
					t.Errorf("%q security=%s ask=%s: %s (%s), want %s", cmd, sec, ask, d.Outcome, d.Reason, want)
				}
				if len(d.Persist) != 0 || d.Pinned != "" {
					t.Errorf("%q security=%s ask=%s: persists %q, pins %q", cmd, sec, ask, d.Persist, d.Pinned)
				}
				if sec == SecurityAllowlist && ask != AskAlways && !strings.Contains(d.Reason, "PowerShell") {
					t.Errorf("%q security=%s ask=%s: reason %q does not say why", cmd, sec, ask, d.Reason)
				}
				if (cmd == "ls" || cmd == "echo {Remove-Item x}") && sec == SecurityAllowlist && ask == AskOnMiss && bash.Outcome != OutcomeRun {
					t.Errorf("%q: the bash analysis gives %s: the case no longer shows that the rule changes the outcome", cmd, bash.Outcome)
				}
			}
		}
	}
}
