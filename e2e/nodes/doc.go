// Package nodes holds the end-to-end tests of node hosts: pairing,
// identity, the node protocol and the nodes CLI. The harness is
// internal/testkit/e2etest.
package nodes
