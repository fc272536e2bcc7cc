// Package process holds the end-to-end tests of the exec and process
// tools on `conch mcp`: running, waiting, PTY sessions and screens, input,
// results and their bounds, session lifecycle, the tools' schemas. The
// harness is internal/testkit/e2etest.
package process
