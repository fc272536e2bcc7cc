package e2etest

import (
	conchcli "github.com/conchsh/conch/internal/cli"
)

// The exit codes the tests expect, from the one table in internal/cli.
const (
	ExitOK          = conchcli.ExitOK
	ExitFailed      = conchcli.ExitFailed
	ExitUsage       = conchcli.ExitUsage
	ExitNotFound    = conchcli.ExitNotFound
	ExitForbidden   = conchcli.ExitForbidden
	ExitConflict    = conchcli.ExitConflict
	ExitUnavailable = conchcli.ExitUnavailable
	ExitNoWait      = conchcli.ExitNoWait
	ExitDenied      = conchcli.ExitDenied
	ExitConfig      = conchcli.ExitConfig
	ExitTimeout     = conchcli.ExitTimeout
	ExitConchError  = conchcli.ExitConchError
	exitInterrupted = conchcli.ExitInterrupted
)
