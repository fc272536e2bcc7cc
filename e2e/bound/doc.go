// Package bound holds the end-to-end test that every result of every
// exec and process action stays within its bounds (TestResultBoundEveryAction,
// the suite's longest test, in a package of its own so that go test runs it
// alongside the others) and the other result-bound tests. The harness is
// internal/testkit/e2etest.
package bound
