package policy

import (
	"strconv"
	"strings"
	"testing"
)

// TestSafeBinReproducers are the reported bypasses: each let a default safe
// bin read or write a file through an argument the old validator read as a
// flag value or skipped.
func TestSafeBinReproducers(t *testing.T) {
	for _, c := range []string{
		// GNU uniq --group[=METHOD] takes its argument only with "=":
		// "-" and ".bash_profile" are uniq's INPUT and OUTPUT.
		"uniq --group - --group .bash_profile",
		"uniq --group etc/shadow",
		"uniq --all-repeated - out",
		"uniq --gr - --gr out", // abbreviated
		// the empty word and "-" are operands
		"jq '' file.json",
		"jq . -",
		"head - -",
		"uniq '' out",
		"tr a b ''", // three operands
		// "--" followed by operands
		"head -- -",
		"cut -f1 -- in",
		// an optional-argument option never consumes the next word
		"grep -e x --color always",
		"sort --check x",
	} {
		if v, rule := safeBinVerdict(t, c); v == VerdictSafeBins {
			t.Errorf("%q passed as a safe bin (%s): it reads or writes a file", c, rule)
		}
	}
}

// TestSafeBinAbbreviationsResolveAgainstTheTool: an abbreviation means
// what it means to the tool's getopt, which knows options no profile
// lists.
func TestSafeBinAbbreviationsResolveAgainstTheTool(t *testing.T) {
	tests := []struct {
		cmd  string
		pass bool
	}{
		{"sort --ke=1,1", true},
		{"sort --f=1", false}, // --field-separator or --files0-from
		{"sort --compress-prog=sh", false},
		{"sort --outp=x", false},           // --output, denied
		{"sort --ra", false},               // --random-sort or --random-source
		{"sort --random-so=x", false},      // --random-source, not in the profile
		{"sort --deb", false},              // --debug: not in the profile
		{"tail --f", false},                // --follow, denied
		{"tail --ret", false},              // --retry, denied
		{"tail ---p", false},               // hidden ---presume-input-pipe
		{"head --s", true},                 // --silent
		{"head --v", false},                // --verbose or --version
		{"head ---pres", false},            // hidden option, not in the profile
		{"grep -e x --colo", false},        // --color and --colour: one option, not in the profile
		{"grep -e x --exclude-d=x", false}, // --exclude-dir: not in the profile
		{"grep -e x --exclude=x", true},
		{"grep -e x --fixed-r", false}, // hidden alias of -F, not listed by the profile
		{"wc --fi=x", false},           // --files0-from, denied
		{"cut --c=1", false},           // --characters or --complement
		{"cut --ch=1", true},
		{"uniq --c", false},   // --count or --check-chars
		{"jq --raw .", false}, // jq has no abbreviations
		{"jq --raw-output .", true},
		{"jq --indent=2 .", false}, // jq takes no --name=value
	}
	for _, tt := range tests {
		v, rule := safeBinVerdict(t, tt.cmd)
		if got := v == VerdictSafeBins; got != tt.pass {
			t.Errorf("%q: safe bin %v (%s), want %v", tt.cmd, got, rule, tt.pass)
		}
	}
}

// TestSafeBinGetoptForms covers clusters, attached values, values that
// look like options, permutation and the obsolete count of head and tail.
func TestSafeBinGetoptForms(t *testing.T) {
	tests := []struct {
		cmd  string
		pass bool
	}{
		{"head -n-5", true},
		{"head -n -5", true},    // the value of -n, not an option
		{"cut -d -- -f1", true}, // "--" is the value of -d
		{"cut -f1 -d", false},   // missing value
		{"head -qn5", true},     // cluster ending in a value flag
		{"head -nq", true},      // "q" is the value of -n (the tool rejects it)
		{"head -qn", false},
		{"tr a-z A-Z --delete", true}, // permutation: an option after operands
		{"tr -d x -- -y", true},       // "-y" an operand after "--"
		{"head -5", true},
		{"head -5 -n 2", true},
		{"head -n 2 -5", false}, // -NUM is only a count as the first word
		{"tail -5f", false},
		{"tail -cf", false}, // obsolete form: follow, not -c f
		{"tail -5cf", false},
		{"tail -lf", false},
		{"tail -c", false},  // -c without a value
		{"tail -c f", true}, // -c with the value f (the tool rejects it)
		{"tail -n 2 -cf", true},
		{"uniq --group=append", true},
		{"uniq --group=", true},
		{"uniq --group=/etc/x", false},
		{"uniq --count=x", false},
		{"uniq -5", false}, // a digit option: skip fields, not in the profile
		{"grep -e x -5", false},
		{"grep -rex x", false}, // -r in a cluster
		{"grep -ie x", true},
		{"sort -ko", true},   // "o" is the value of -k
		{"sort -rok", false}, // -o in a cluster
		{"sort -y0", false},  // hidden -y
	}
	for _, tt := range tests {
		v, rule := safeBinVerdict(t, tt.cmd)
		if got := v == VerdictSafeBins; got != tt.pass {
			t.Errorf("%q: safe bin %v (%s), want %v", tt.cmd, got, rule, tt.pass)
		}
	}
}

// TestSegmentCap: a command with more than MaxSegments segments, inline
// scripts included, is not satisfied, with the reason, even when every
// segment would be.
func TestSegmentCap(t *testing.T) {
	ok := "echo hi" + strings.Repeat(" | head", MaxSegments-1)
	if d := Evaluate(stdRequest(ok)); d.Outcome != OutcomeRun {
		t.Fatalf("%d segments: %s %s", MaxSegments, d.Outcome, d.Reason)
	}
	for _, cmd := range []string{
		"echo hi" + strings.Repeat(" | head", MaxSegments),
		"echo hi" + strings.Repeat(" | cat", 2000),
		"echo hi" + strings.Repeat("; echo", 2000),
		"echo hi | bash -c 'echo hi" + strings.Repeat(" | head", MaxSegments-1) + "'",
		"bash -c 'echo" + strings.Repeat(" | head", 200) + "' | bash -c 'echo" + strings.Repeat(" | head", 200) + "'",
	} {
		req := stdRequest(cmd)
		req.Ask = AskOff
		d := Evaluate(req)
		if d.Outcome == OutcomeRun {
			t.Errorf("%.40q…: ran", cmd)
			continue
		}
		why := d.Analysis.Reason
		if d.Analysis.OK {
			s, _ := firstMiss(d.Analysis.Parts, "")
			if s != nil {
				why = s.Rule
			}
		}
		if !strings.Contains(why, "too many segments") {
			t.Errorf("%.40q…: reason %q, want too many segments", cmd, why)
		}
	}
}

// TestAllowlistCaseSensitive: on a host that tells case apart the pattern
// /x/bin/tool does not match the different file /x/BIN/TOOL; on one that
// folds case it does (there it is the same file).
func TestAllowlistCaseSensitive(t *testing.T) {
	fs := newFakeFS().exe("/x/bin/tool", "/x/BIN/TOOL")
	req := Request{
		Command: "/x/BIN/TOOL", Security: SecurityAllowlist, Ask: AskOff,
		Allowlist: []AllowEntry{{Pattern: "/x/bin/tool"}},
		Env:       fs.env("/usr/bin", "/", "/home/u"),
	}
	if d := Evaluate(req); d.Outcome == OutcomeRun {
		t.Errorf("/x/bin/tool matched /x/BIN/TOOL on a case-sensitive host")
	}
	req.Command = "/x/bin/tool"
	if d := Evaluate(req); d.Outcome != OutcomeRun {
		t.Errorf("/x/bin/tool: %s %s", d.Outcome, d.Reason)
	}
	req.Command = "/x/BIN/TOOL"
	req.Allowlist = []AllowEntry{{Pattern: "/x/*/tool"}}
	if d := Evaluate(req); d.Outcome == OutcomeRun {
		t.Errorf("/x/*/tool matched /x/BIN/TOOL on a case-sensitive host")
	}
	req.Env.FoldCase = true
	if d := Evaluate(req); d.Outcome != OutcomeRun {
		t.Errorf("FoldCase: /x/*/tool did not match /x/BIN/TOOL: %s", d.Reason)
	}
}

// TestLengthCapOnTheSentCommand: the length cap is checked on the command
// as the agent sent it, and reported with its length; a command within the
// cap whose pinned form (absolute paths in place of names) is not, is
// refused with both lengths and by how much to shorten it, never with
// "longer than 131071 bytes" for a shorter command. Generated at every
// length around the cap, plain, piped and under bash -c.
func TestLengthCapOnTheSentCommand(t *testing.T) {
	for _, shape := range []struct{ pre, post string }{{"echo ", ""}, {"echo hi | echo ", ""}, {"bash -c 'echo ", "'"}} {
		for _, n := range []int{MaxCommandBytes - 40, MaxCommandBytes - 10, MaxCommandBytes - 1, MaxCommandBytes, MaxCommandBytes + 1, MaxCommandBytes + 30} {
			cmd := shape.pre + strings.Repeat("a", n-len(shape.pre)-len(shape.post)) + shape.post
			req := stdRequest(cmd)
			req.Ask = AskOff
			req.Allowlist = append(req.Allowlist, AllowEntry{Pattern: "/usr/bin/bash"})
			d := Evaluate(req)
			switch {
			case len(cmd) > MaxCommandBytes:
				if d.Outcome == OutcomeRun || !strings.Contains(d.Analysis.Reason, "longer than 131071 bytes (it is "+strconv.Itoa(len(cmd))+")") {
					t.Errorf("%q… of %d bytes: %s %q / %q", shape.pre, len(cmd), d.Outcome, d.Reason, d.Analysis.Reason)
				}
			case d.Outcome == OutcomeRun:
				if len(d.Pinned) > MaxCommandBytes {
					t.Errorf("%q… of %d bytes: runs a pinned form of %d bytes", shape.pre, len(cmd), len(d.Pinned))
				}
			default:
				if strings.Contains(d.Reason+d.Analysis.Reason, "longer than") ||
					!strings.Contains(d.Reason, "the command is "+strconv.Itoa(len(cmd))+" bytes") || !strings.Contains(d.Reason, "shorten it by ") {
					t.Errorf("%q… of %d bytes, within the cap: %s %q", shape.pre, len(cmd), d.Outcome, d.Reason)
				}
			}
		}
	}
}
