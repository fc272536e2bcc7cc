package engine

import (
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/node/port"
	"github.com/conchsh/conch/policy"
)

// nodeShellArgv is the argv a Windows node runs for the gateway's argv:
// the script of the gateway's shell wrapper (/bin/sh -lc SCRIPT, which
// the gateway sends whatever the node's system) runs in this node's
// PowerShell (host.ShellArgv); any other argv runs as it is. Not yet run
// on Windows.
func nodeShellArgv(argv []string) []string {
	if script, ok := port.ShellScript(argv); ok {
		return host.ShellArgv(script)
	}
	return argv
}

// shellLanguage is the policy's Request.Shell: commands run in
// PowerShell, which the policy does not parse, so in allowlist mode each
// one asks (or, with ask=off, is denied).
const shellLanguage = policy.ShellPowerShell
