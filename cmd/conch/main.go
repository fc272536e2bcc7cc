// Command conch is a shell-execution gateway for AI agents: it gives agents
// an exec tool to run commands and a process tool to steer the ones that
// keep running, over MCP. Its commands live in internal/cli; `conch help`
// lists them.
//
// `conch supervise` and `conch sandbox-init` are internal entry points (a
// session's supervisor, a sandbox's init), the jobs of the small
// conch-shim program (cmd/conch-shim); the engine re-executes this binary
// for them only when it finds no shim (internal/session/shim). They are
// dispatched here, before the command line is parsed, and take their own
// arguments.
package main

import (
	"os"

	conchcli "github.com/conchsh/conch/internal/cli"
	"github.com/conchsh/conch/internal/session/shim/entry"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the exit code of one invocation (the table is conchcli.ExitCodes).
func run(args []string) int {
	if code, ok := entry.Main(args); ok {
		return code
	}
	return conchcli.Main(args, os.Stdin, os.Stdout, os.Stderr)
}
