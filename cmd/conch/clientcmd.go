package main

import "io"

// runClientCommand runs the session commands of the CLI (exec, ps, poll,
// log, kill, …) against a gateway or the home; ok is false for a name that
// is not one of them.
func runClientCommand(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int, ok bool) {
	return 0, false
}
