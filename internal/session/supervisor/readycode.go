package supervisor

import (
	"errors"
	"syscall"

	"github.com/conchsh/conch/internal/session/shim"
)

// CodeProtocolSkew is the ready code of a supervisor that refused the
// protocol version it was started with (package shim writes it).
const CodeProtocolSkew = "protocol_skew"

// ErrOpenPTY is the start error of a session whose PTY could not be
// opened; the engine retries such a run without one.
var ErrOpenPTY = errors.New("open pty")

// readyCodes map the codes of a failed ready report to the errors a
// caller tests with errors.Is. A start failure is classified where it
// happens (readyCode) and travels as a code: the caller never reads the
// message to learn what went wrong.
var readyCodes = map[string]error{
	"needs_cgroup":   ErrNeedsCgroup,
	"open_pty":       ErrOpenPTY,
	"emfile":         syscall.EMFILE,
	"enfile":         syscall.ENFILE,
	"no_space":       syscall.ENOSPC,
	CodeProtocolSkew: shim.ErrSkew,
}

// readyCode is the code of a start failure, or "" when none applies.
func readyCode(err error) string {
	switch {
	case errors.Is(err, ErrNeedsCgroup):
		return "needs_cgroup"
	case errors.Is(err, ErrOpenPTY):
		return "open_pty"
	case errors.Is(err, syscall.EMFILE):
		return "emfile"
	case errors.Is(err, syscall.ENFILE):
		return "enfile"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "no_space"
	case errors.Is(err, shim.ErrSkew):
		return CodeProtocolSkew
	}
	return ""
}

// startError is a failed ready report: its message as the supervisor
// wrote it, unwrapping to the sentinel its code names.
type startError struct {
	msg  string
	kind error
}

func (e *startError) Error() string { return e.msg }
func (e *startError) Unwrap() error { return e.kind }

// reportError turns a failed ready report into an error.
func reportError(r ready) error {
	kind := readyCodes[r.Code]
	if kind == nil && r.NoSpace {
		kind = syscall.ENOSPC // a supervisor from before codes
	}
	return &startError{msg: r.Error, kind: kind}
}
