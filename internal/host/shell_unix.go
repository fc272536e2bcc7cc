//go:build unix

package host

// ShellArgv is the argv that runs command in the host's shell:
// `ShellPath() -c command`.
func ShellArgv(command string) []string { return []string{ShellPath(), "-c", command} }
