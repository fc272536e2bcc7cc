//go:build unix

package engine

// nodeShellArgv is the argv a node runs for the gateway's argv: as it
// is (the gateway's shell wrapper, /bin/sh -lc, exists here).
func nodeShellArgv(argv []string) []string { return argv }

// shellLanguage is the policy's Request.Shell: commands run in a POSIX
// shell, which the policy parses.
const shellLanguage = ""
