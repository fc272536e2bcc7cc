// Package gateway holds the end-to-end tests of `conch serve`: the HTTP
// API and MCP over HTTP, cross-client conformance, connection limits,
// metrics, tracing, shutdown, the launcher and the first start. The
// harness is internal/testkit/e2etest.
package gateway
