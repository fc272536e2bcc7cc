//go:build unix

package host

// hostEnvRules are this system's: case-sensitive keys, ":" in PATH.
var hostEnvRules = unixEnvRules
