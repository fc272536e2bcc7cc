// Package e2etest is the harness of conch's end-to-end tests (the packages
// under e2e/ at the module's root): it builds the conch binary once per
// source state (Main), starts `conch mcp` (StartConch), `conch serve`
// (StartGateway, StartServe) and node hosts (StartNode) on fresh homes,
// and drives them with the official MCP client and HTTP. Its files are
// not _test.go files so that every end-to-end package can import them;
// only test binaries import it (internal/testkit/archtest says so).
//
// Helpers take testing.TB; deadlines that wait for an event are scaled by
// Slow (CONCH_TEST_SLOW) so that a loaded machine makes a failing test
// slower, never a passing test fail.
package e2etest
