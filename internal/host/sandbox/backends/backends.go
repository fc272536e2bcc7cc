// Package backends is the one list of the sandbox backends this program
// has: importing it registers each with internal/host/sandbox, so that
// sandbox.For and sandbox.New know them. A new backend is a subpackage
// of internal/host/sandbox that calls sandbox.Register from its init
// function, plus one line here (or in the file of the OS it runs on:
// backends_linux.go holds the backends that need Linux, backends_unix.go
// those of every Unix). Windows has none: the docker backend runs this
// program's own binary inside a Linux container (sandbox-init), and a
// Windows conch is no Linux program.
package backends
