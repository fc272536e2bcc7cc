// Package cli holds the end-to-end tests of the client CLI (conch exec,
// process, ps, log...) against a running engine, its exit codes and deep
// commands. The harness is internal/testkit/e2etest.
package cli
