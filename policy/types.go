package policy

import (
	"io/fs"
)

// Security is the enforcement mode for host execution.
type Security string

// The security levels, from the most to the least restrictive.
const (
	SecurityDeny      Security = "deny"
	SecurityAllowlist Security = "allowlist"
	SecurityFull      Security = "full"
)

func (s Security) rank() int {
	switch s {
	case SecurityDeny:
		return 0
	case SecurityAllowlist:
		return 1
	case SecurityFull:
		return 2
	}
	return -1 // unknown values rank below deny
}

// Valid reports whether s is one of the three levels.
func (s Security) Valid() bool { return s.rank() >= 0 }

// Min returns the more restrictive of a and b (deny < allowlist < full).
// An invalid value is treated as deny.
func Min(a, b Security) Security {
	if !a.Valid() || !b.Valid() {
		return SecurityDeny
	}
	if a.rank() <= b.rank() {
		return a
	}
	return b
}

// Ask is the approval prompting mode.
type Ask string

// The ask modes, from the least to the most prompting.
const (
	AskOff    Ask = "off"
	AskOnMiss Ask = "on-miss"
	AskAlways Ask = "always"
)

func (a Ask) rank() int {
	switch a {
	case AskOff:
		return 0
	case AskOnMiss:
		return 1
	case AskAlways:
		return 2
	}
	return 3 // unknown values rank above always
}

// Valid reports whether a is one of the three modes.
func (a Ask) Valid() bool { return a.rank() <= 2 }

// Max returns the more prompting of a and b (off < on-miss < always). An
// invalid value is treated as always.
func Max(a, b Ask) Ask {
	if !a.Valid() || !b.Valid() {
		return AskAlways
	}
	if a.rank() >= b.rank() {
		return a
	}
	return b
}

// AllowEntry is one allowlist pattern with where it came
// from.
type AllowEntry struct {
	// Pattern is a glob on the resolved executable path. Only patterns that
	// contain "/" or start with "~" count, and the pattern "*" matches every
	// resolved executable.
	Pattern string
	// Source names the entry in explain output and the ledger, e.g.
	// `agents.main.allowlist[2]`. Empty means `allowlist[<index>]`.
	Source string
}

// Profile is a safe-bin argv profile. The zero Profile
// accepts the bare command only (no flags, no positionals).
type Profile struct {
	// MinPositional and MaxPositional bound the number of positional
	// arguments; MaxPositional < MinPositional means MaxPositional =
	// MinPositional.
	MinPositional int `json:"minPositional,omitempty"`
	MaxPositional int `json:"maxPositional,omitempty"`
	// AllowedValueFlags take a value (`-n 5`, `-n5`, `--lines=5`).
	AllowedValueFlags []string `json:"allowedValueFlags,omitempty"`
	// AllowedBoolFlags take none (`-l`, `--count`).
	AllowedBoolFlags []string `json:"allowedBoolFlags,omitempty"`
	// DeniedFlags reject the command, also when abbreviated.
	DeniedFlags []string `json:"deniedFlags,omitempty"`
}

// Env is what resolution needs from the execution host. The zero Env has an
// empty PATH and no cwd or home, so only absolute command paths resolve.
type Env struct {
	// PATH is the PATH of the exec environment (after the login-shell merge
	// and pathPrepend). An empty entry means the working directory, as in
	// the shell.
	PATH string
	// Cwd is the absolute working directory, for cwd-relative commands and
	// PATH entries. Empty: they do not resolve.
	Cwd string
	// Home is the home of the execution host, for `~` in commands,
	// allowlist patterns and trusted dirs. Empty: `~` does not expand.
	Home string
	// FoldCase says the host's file system folds case (macOS, Windows):
	// allowlist patterns then match paths ignoring case. False (Linux):
	// "/x/bin/tool" does not match the different file "/x/BIN/TOOL".
	FoldCase bool
	// WindowsPaths says the host's paths are Windows paths (a drive
	// letter, "\" as the separator): a resolved path is then matched
	// against allowlist patterns with "\" read as "/", as patterns are.
	// False: "\" is an ordinary character of a file name.
	WindowsPaths bool
	// Stat returns the file info of name, following symlinks. nil means
	// os.Stat.
	Stat func(name string) (fs.FileInfo, error)
	// EvalSymlinks returns the realpath of a path. nil means
	// filepath.EvalSymlinks.
	EvalSymlinks func(path string) (string, error)
}

// Request is everything one decision depends on. The zero value of each
// field is documented; Evaluate never modifies the Request.
type Request struct {
	// Command is the shell text as the agent sent it.
	Command string
	// Security is the effective security (the request may only tighten, the
	// stricter of tool and approvals file wins). Empty means
	// allowlist; an unknown value means deny.
	Security Security
	// Ask is the effective ask. Empty means on-miss; an unknown value means
	// always.
	Ask Ask
	// Host names the execution host in the security=deny text
	// ("gateway" or "node"). Empty means gateway.
	Host string
	// Allowlist is the agent's allowlist ("*" entries first, then the
	// agent's).
	Allowlist []AllowEntry
	// SafeBins lists safe-bin basenames (lower-cased). nil means
	// [DefaultSafeBins]; an empty non-nil slice disables safe bins.
	SafeBins []string
	// TrustedDirs are added to [DefaultTrustedDirs]. Relative entries are
	// ignored with a warning; a leading "~/" expands to Env.Home.
	TrustedDirs []string
	// Profiles are custom safe-bin profiles; a key overrides the built-in
	// profile of the same name.
	Profiles map[string]Profile
	// StrictInlineEval makes interpreter inline code (`python3 -c`) never
	// satisfied in allowlist mode.
	StrictInlineEval bool
	// Terminal says the command runs with a terminal as its standard
	// streams (PTY mode). Some wrappers touch files only then: nohup
	// writes nohup.out when its output is a terminal, so it is not
	// transparent with Terminal set. Pass true when unsure.
	Terminal bool
	// Env is the execution host's environment for resolution.
	Env Env
	// Shell is the language the host's shell reads the command in: ""
	// for a POSIX shell, the language this package parses (as bash), or
	// ShellPowerShell, which it does not parse: no segment is then
	// satisfied (a PowerShell subexpression such as @(…) is a word to
	// bash), so in allowlist mode every command asks or, with ask=off,
	// is denied, and allow-always persists nothing.
	Shell string
}

// ShellPowerShell is Request.Shell for a host whose commands run in
// PowerShell (Windows).
const ShellPowerShell = "powershell"

// The segment verdicts.
const (
	VerdictAllowlist = "allowlist" // matched an allowlist entry
	VerdictSafeBins  = "safeBins"  // passed a safe-bin profile
	VerdictMiss      = "miss"      // not satisfied; allow-always may persist it
	VerdictBlocked   = "blocked"   // never satisfied (blocked wrapper, builtin, inline eval, …)
)

// Segment is one simple command of a pipeline.
type Segment struct {
	// Text is the command's source text (heredoc bodies excluded).
	Text string
	// Argv holds the words as written: each word after quote removal when
	// it contains no expansion, else its source text. Nothing is expanded.
	Argv []string
	// Exe is the resolved absolute path of the command that runs, after
	// unwrapping dispatch wrappers; empty when unresolved.
	Exe string
	// RealPath is Exe with every symlink resolved.
	RealPath string
	// Wrappers are the resolved paths of the dispatch wrappers that were
	// unwrapped to reach Exe, outermost first.
	Wrappers []string
	// Inner holds the analysed segments of a shell wrapper's -c script.
	Inner []Part
	// Script is the realpath of the script run by `<shell> path/to/script`.
	Script string
	// Verdict is one of the Verdict constants ("" from [Analyze], which
	// resolves nothing).
	Verdict string
	// Rule says why: the allowlist entry's Source for "allowlist",
	// "profile <bin> (…)" for "safeBins", the reason otherwise.
	Rule string
	// Pattern is the matched allowlist pattern for "allowlist".
	Pattern string

	persist []string // what allow-always would persist for this segment
}

// Part is one part of a chain: a pipeline of one or more segments.
type Part struct {
	// Op is the operator before the part: "" for the first, else "&&",
	// "||" or ";".
	Op       string
	Segments []Segment
}

// Analysis is the shape check of a command.
type Analysis struct {
	// OK is true when the command only uses accepted shapes.
	OK bool
	// Reason says why the analysis failed, in the spec's words
	// ("unsupported shell construct: <x>", "line continuation", …).
	Reason string
	// Pos is the line:column (1-based, columns in bytes) of the construct
	// that failed the analysis, or "".
	Pos string
	// Parts are the chain parts; empty when the analysis failed.
	Parts []Part
	// Heredoc is true when a segment has a heredoc.
	Heredoc bool
	// Expanded is what the words analysed so far expand to by brace
	// expansion (all of them when OK): the analysis fails beyond
	// MaxExpandedWords or MaxExpandedBytes.
	Expanded Expansion
}

// Expansion is the size of a command's words after brace expansion:
// Words counts them as bash does (a word without braces is one), Bytes
// bounds their total length, one separator per word included. Both
// saturate at the largest uint64.
type Expansion struct {
	Words, Bytes uint64
}

// The decision outcomes.
const (
	OutcomeRun    = "run"
	OutcomePrompt = "prompt"
	OutcomeDeny   = "deny"
)

// Decision is the outcome of [Evaluate].
type Decision struct {
	// Outcome is "run", "prompt" or "deny".
	Outcome string
	// Reason is the denial text ("exec denied: …") for deny, the approval
	// reason ("allowlist miss: /usr/bin/curl", "ask=always") for prompt,
	// and "" for run.
	Reason string
	// Analysis carries the parts with resolved segments and verdicts.
	Analysis Analysis
	// Security and Ask are the effective values the matrix used.
	Security Security
	Ask      Ask
	// Pinned is the pinned command text when the command
	// was auto-allowed in allowlist mode; the shell must run it instead of
	// Command. "" otherwise.
	Pinned string
	// Persist lists what allow-always would add to the allowlist, in allowlist mode only; empty when nothing can be persisted.
	Persist []string
	// Warnings are agent-facing warnings, e.g. the heredoc warning.
	Warnings []string
}
