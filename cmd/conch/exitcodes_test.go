package main

import conchcli "github.com/conchsh/conch/internal/cli"

// The exit codes the tests expect, from the one table in internal/cli.
const (
	exitOK          = conchcli.ExitOK
	exitFailed      = conchcli.ExitFailed
	exitUsage       = conchcli.ExitUsage
	exitNotFound    = conchcli.ExitNotFound
	exitForbidden   = conchcli.ExitForbidden
	exitConflict    = conchcli.ExitConflict
	exitUnavailable = conchcli.ExitUnavailable
	exitNoWait      = conchcli.ExitNoWait
	exitDenied      = conchcli.ExitDenied
	exitConfig      = conchcli.ExitConfig
	exitTimeout     = conchcli.ExitTimeout
	exitConchError  = conchcli.ExitConchError
	exitInterrupted = conchcli.ExitInterrupted
)
