package policy

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Texts of the decision.
const (
	deniedAllowlistMiss = "exec denied: allowlist miss"
	deniedPlanPrefix    = "exec denied: allowlist execution plan unavailable ("
	// HeredocWarning is added when a heredoc keeps a command from being
	// auto-allowed in allowlist mode.
	HeredocWarning = "Warning: heredoc execution requires explicit approval in allowlist mode."
)

// effective normalises the request's security and ask: empty values take
// the built-in defaults, unknown values fail closed.
func effective(s Security, a Ask) (Security, Ask) {
	switch {
	case s == "":
		s = SecurityAllowlist
	case !s.Valid():
		s = SecurityDeny
	}
	switch {
	case a == "":
		a = AskOnMiss
	case !a.Valid():
		a = AskAlways
	}
	return s, a
}

// Evaluate decides whether req.Command runs, needs an approval or is
// denied:
//
//	requiresApproval = ask == always OR (ask == on-miss AND security ==
//	allowlist AND (analysis failed OR not every segment satisfied))
//
// with security deny always denying and, in allowlist mode with ask=off, a
// miss denying. A heredoc, a blocked wrapper, a builtin and strict inline
// eval count as misses. Every segment is resolved and judged whatever the
// security, so the Analysis can feed explain output and the ledger.
//
// Evaluate reads the filesystem through req.Env (stat and realpath) and
// never executes anything. It never panics on any input.
func Evaluate(req Request) Decision {
	sec, ask := effective(req.Security, req.Ask)
	d := Decision{Security: sec, Ask: ask}
	a := analyze(req.Command)
	e := newEvaluator(&req)

	all := a.OK && req.Shell == ""
	e.segments = a.segments()
	var pinned strings.Builder
	if a.OK {
		for pi := range a.Parts {
			part := &a.Parts[pi]
			if pi > 0 {
				pinned.WriteString(opText(part.Op))
			}
			for si := range part.Segments {
				seg, pin := e.segment(a.cmds[pi][si], 0)
				part.Segments[si] = seg
				if !satisfied(seg.Verdict) {
					all = false
				}
				if si > 0 {
					pinned.WriteString(" | ")
				}
				pinned.WriteString(strings.Join(pin, " "))
			}
		}
	}
	heredoc := a.Heredoc || e.heredoc
	d.Analysis = a.Analysis
	d.Warnings = e.warnings
	if sec == SecurityAllowlist && heredoc {
		d.Warnings = append(d.Warnings, HeredocWarning)
	}

	switch {
	case sec == SecurityDeny:
		host := req.Host
		if host == "" {
			host = "gateway"
		}
		d.Outcome, d.Reason = OutcomeDeny, "exec denied: host="+host+" security=deny"
	case ask == AskAlways:
		d.Outcome, d.Reason = OutcomePrompt, "ask=always"
	case sec == SecurityFull:
		d.Outcome = OutcomeRun
	case all && !heredoc:
		d.Outcome = OutcomeRun
		d.Pinned = pinned.String()
		// The command as sent is within the cap (else the analysis failed
		// on it); its pinned form, the executables' absolute paths in
		// place of their names, may not be, and a longer one could not
		// be started (one argument of a process holds MaxCommandBytes).
		// Say so in the agent's terms rather than re-analysing it.
		if len(d.Pinned) > MaxCommandBytes {
			d.Outcome, d.Reason = OutcomeDeny, pinnedTooLong(len(req.Command), len(d.Pinned))
			d.Pinned = ""
		} else if check := analyze(d.Pinned); !check.OK {
			d.Outcome, d.Reason, d.Pinned = OutcomeDeny, deniedPlanPrefix+check.Reason+")", ""
		}
	case ask == AskOff:
		d.Outcome, d.Reason = OutcomeDeny, deniedAllowlistMiss
		if req.Shell != "" {
			d.Reason += " (commands run in PowerShell here, which the allowlist analysis does not read)"
		} else if !a.OK && boundReason(a.Reason) {
			// A bound, not a shape: say which, so the agent can split
			// the command instead of asking for an allowlist entry.
			d.Reason += " (" + a.Reason + ")"
		}
	case req.Shell != "":
		d.Outcome, d.Reason = OutcomePrompt, unparsedShellReason
	default:
		d.Outcome, d.Reason = OutcomePrompt, promptReason(d.Analysis, heredoc)
	}
	if sec == SecurityAllowlist && d.Outcome != OutcomeRun && req.Shell == "" {
		d.Persist = persist(d.Analysis.Parts)
	}
	return d
}

// unparsedShellReason is the prompt of a command whose shell this
// package does not parse (Request.Shell).
const unparsedShellReason = "approval required: commands run in PowerShell here, which the allowlist analysis does not read (it parses bash), so no allowlist entry or safe bin can satisfy them"

// boundReason reports whether an analysis failed on one of its bounds
// (MaxSegments, MaxExpandedWords, MaxExpandedBytes, the scan budget of
// brace expansion) rather than on a shape it does not accept.
func boundReason(r string) bool {
	return strings.HasPrefix(r, "too many segments: ") || strings.HasPrefix(r, "brace expansion too ")
}

// pinnedTooLong is the reason for a command of sent bytes whose pinned form
// of pinned bytes is over MaxCommandBytes.
func pinnedTooLong(sent, pinned int) string {
	return fmt.Sprintf("exec denied: the command is %d bytes; with its executables pinned to their absolute paths it is %d, more than the %d bytes one argument of a process holds: shorten it by %d bytes",
		sent, pinned, MaxCommandBytes, pinned-MaxCommandBytes)
}

// promptReason says why an approval is needed in allowlist mode.
func promptReason(a Analysis, heredoc bool) string {
	if !a.OK {
		return "analysis failed: " + a.Reason
	}
	if s, _ := firstMiss(a.Parts, ""); s != nil {
		switch {
		case s.Verdict == VerdictMiss && s.Exe != "" && strings.HasPrefix(s.Rule, "no allowlist entry"):
			return "allowlist miss: " + s.Exe
		case s.Exe != "":
			return "allowlist miss: " + s.Exe + " (" + s.Rule + ")"
		case len(s.Argv) > 0:
			return "allowlist miss: " + s.Argv[0] + " (" + s.Rule + ")"
		}
	}
	if heredoc {
		return "heredoc requires approval"
	}
	return "allowlist miss"
}

// firstMiss returns the first unsatisfied segment, looking into the
// inline scripts of shell wrappers, and its index ("2.1").
func firstMiss(parts []Part, prefix string) (*Segment, string) {
	for pi := range parts {
		for si := range parts[pi].Segments {
			s := &parts[pi].Segments[si]
			if satisfied(s.Verdict) {
				continue
			}
			idx := segIndex(prefix, pi, si, len(parts[pi].Segments))
			if len(s.Inner) > 0 {
				if in, inIdx := firstMiss(s.Inner, idx+">"); in != nil {
					return in, inIdx
				}
			}
			return s, idx
		}
	}
	return nil, ""
}

// segIndex numbers segments as explain shows them: "2" for a part with one
// segment, "2.1" inside a pipeline.
func segIndex(prefix string, pi, si, n int) string {
	idx := prefix + itoa(pi+1)
	if n > 1 {
		idx += "." + itoa(si+1)
	}
	return idx
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// persist collects what allow-always would persist: the
// exact paths, each only if it reads as a pattern matching that path and
// no other. The pattern language has no escapes: a file named "*" or
// "**", or one with "?", "\" (read as "/") or surrounding blanks
// (trimmed), would persist a pattern allowing other files.
func persist(parts []Part) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range parts {
		for _, s := range p.Segments {
			for _, x := range s.persist {
				if !exactPattern(x) {
					continue
				}
				if !seen[x] {
					seen[x] = true
					out = append(out, x)
				}
			}
		}
	}
	return out
}

// exactPattern reports whether the path p, used as an allowlist pattern,
// matches p only.
func exactPattern(p string) bool {
	n, ok := normalizePattern(p, "")
	return ok && n == p && filepath.IsAbs(p) && !hasWildcard(p)
}
