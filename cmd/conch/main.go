// Command conch is a shell-execution gateway for AI agents: it gives agents
// an exec tool to run commands and a process tool to steer the ones that
// keep running, over MCP. Its commands live in internal/cli; `conch help`
// lists them.
//
// `conch supervise` and `conch sandbox-init` are internal entry points the
// engine re-executes this binary with (a session's supervisor, a sandbox's
// init): they are dispatched here, before the command line is parsed, and
// take their own arguments.
package main

import (
	"os"

	conchcli "github.com/conchsh/conch/internal/cli"
	"github.com/conchsh/conch/internal/supervisor"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the exit code of one invocation (the table is conchcli.ExitCodes).
func run(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "supervise":
			return supervisor.Main(args[1:])
		}
		if entry, ok := osEntries[args[0]]; ok {
			return entry(args[1:])
		}
	}
	return conchcli.Main(args, os.Stdin, os.Stdout, os.Stderr)
}
