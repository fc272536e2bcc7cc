package cli

import (
	"errors"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/config"
)

// The exit codes of every conch command, in one place. docs/cli.md has
// the same table (a test compares them): ExitCodes below is its source.
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitUsage       = 2
	ExitNotFound    = 3
	ExitForbidden   = 4
	ExitConflict    = 5
	ExitUnavailable = 6
	// exec and `wait --until exit`, beyond the command's own status:
	ExitNoWait      = 75  // approval pending with --no-wait
	ExitDenied      = 77  // denied by policy or by the approver
	ExitConfig      = 78  // invalid config.json (sysexits' EX_CONFIG)
	ExitTimeout     = 124 // conch's timeout (also `wait` timed out)
	ExitConchError  = 125 // exec: conch failed (bad flags too), or a lost session
	ExitInterrupted = 130 // interrupted before a session existed or during a call
)

// ExitCode is one row of the exit-code table.
type ExitCode struct {
	Code    int
	Name    string
	Meaning string
}

// ExitCodes is the table of exit codes as docs/cli.md shows it (besides
// exec's pass-through of the command's own status and 128+N for a signal).
var ExitCodes = []ExitCode{
	{ExitOK, "ok", "done"},
	{ExitFailed, "failed", "any other failure (also `rate_limited`, `quota_exceeded`; a broken ledger; doctor findings)"},
	{ExitUsage, "usage", "bad command line (unknown flag or command, missing argument), `invalid_argument`"},
	{ExitNotFound, "not-found", "`not_found` (unknown or foreign session, unknown agent, approval or node)"},
	{ExitForbidden, "forbidden", "`unauthenticated`, `forbidden`, `denied` (an API call refused)"},
	{ExitConflict, "conflict", "`conflict`, `already_resolved`, `approval_dropped`, `invalid_state` (e.g. `agents add` of an existing agent)"},
	{ExitUnavailable, "unavailable", "no engine reachable, the home is locked or not writable, `unavailable`, `resource_exhausted`"},
	{ExitNoWait, "no-wait", "`exec --no-wait`: an approval is needed"},
	{ExitDenied, "denied", "`exec`: denied by the policy or by the approver"},
	{ExitConfig, "config", "the configuration (`config.json`, `--config`) is invalid"},
	{ExitTimeout, "timeout", "`exec`: conch's timeout killed the command; `wait`: timed out"},
	{ExitConchError, "conch-error", "`exec`: conch failed (bad flags, no command, no engine reachable, an error result, a `lost` session)"},
	{ExitInterrupted, "interrupted", "interrupted (Ctrl-C) before a session existed or during a call"},
}

// exitFor is the one place that maps a failure to an exit code: an
// invalid configuration, an unusable home, an API error (by its code,
// else its HTTP status). Any other error gets otherwise, the command's own
// code for "failed" (1, exec's 125, or 6 where the failure means that no
// engine was reachable).
func exitFor(err error, otherwise int) int {
	var ae *client.Error
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, config.ErrInvalid):
		return ExitConfig
	case errors.Is(err, engine.ErrHomeLocked), errors.Is(err, engine.ErrHomeNotWritable):
		return ExitUnavailable
	case errors.As(err, &ae):
		return exitForAPIError(ae)
	}
	return otherwise
}

// exitForError maps a failed call of a command other than exec: an error
// that is not the API's means that no engine was reachable.
func exitForError(err error) int { return exitFor(err, ExitUnavailable) }

// exitForAPIError maps an API error by its code, else its HTTP status.
func exitForAPIError(ae *client.Error) int {
	switch ae.Code {
	case "invalid_argument":
		return ExitUsage
	case "not_found", "node_unknown":
		return ExitNotFound
	case "unauthenticated", "forbidden", "denied", "host_not_allowed", "security_violation", "elevated_unavailable", "node_not_allowed", "path_outside_workspace":
		return ExitForbidden
	case "conflict", "idempotency_conflict", "node_ambiguous", "already_resolved", "approval_dropped", "invalid_state":
		return ExitConflict
	case "unavailable", "sandbox_unavailable", "node_unavailable", "resource_exhausted":
		return ExitUnavailable
	}
	return exitForStatus(ae.Status)
}

// exitForStatus maps an HTTP status.
func exitForStatus(status int) int {
	switch {
	case status == 400:
		return ExitUsage
	case status == 401 || status == 403:
		return ExitForbidden
	case status == 404:
		return ExitNotFound
	case status == 409:
		return ExitConflict
	case status == 502 || status == 503 || status == 504:
		return ExitUnavailable
	}
	return ExitFailed
}
