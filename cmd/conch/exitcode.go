package main

import (
	"errors"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/config"
)

// exitConfig is the exit code of every command that stops on an invalid
// $CONCH_HOME/config.json (sysexits' EX_CONFIG, next to exec's 75 and
// 77): the same for conch serve, conch mcp, conch exec and the other
// session commands, policy explain and sandbox.
const exitConfig = 78

// exitFor is the one place that maps a failure to an exit code: an
// invalid configuration, an unusable home, an API error (by its code,
// else its HTTP status). Any other error gets otherwise, the command's own
// code for "failed" (1, exec's 125, or 6 where the failure means that no
// engine was reachable).
func exitFor(err error, otherwise int) int {
	var ae *client.Error
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, config.ErrInvalid):
		return exitConfig
	case errors.Is(err, engine.ErrHomeLocked), errors.Is(err, engine.ErrHomeNotWritable):
		return exitUnavailable
	case errors.As(err, &ae):
		return exitForAPIError(ae)
	}
	return otherwise
}

// exitForError maps a failed call of a command other than exec: an error
// that is not the API's means that no engine was reachable.
func exitForError(err error) int { return exitFor(err, exitUnavailable) }

// exitForAPIError maps an API error by its code, else its HTTP status.
func exitForAPIError(ae *client.Error) int {
	switch ae.Code {
	case "invalid_argument":
		return exitUsage
	case "not_found", "node_unknown":
		return exitNotFound
	case "unauthenticated", "forbidden", "denied", "host_not_allowed", "security_violation", "elevated_unavailable", "node_not_allowed", "path_outside_workspace":
		return exitForbidden
	case "conflict", "idempotency_conflict", "node_ambiguous", "already_resolved", "invalid_state":
		return exitConflict
	case "unavailable", "sandbox_unavailable", "node_unavailable":
		return exitUnavailable
	}
	switch {
	case ae.Status == 400:
		return exitUsage
	case ae.Status == 401 || ae.Status == 403:
		return exitForbidden
	case ae.Status == 404:
		return exitNotFound
	case ae.Status == 409:
		return exitConflict
	case ae.Status == 502 || ae.Status == 503 || ae.Status == 504:
		return exitUnavailable
	}
	return exitFailed
}
