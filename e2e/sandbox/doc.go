//go:build linux

// Package sandbox holds the end-to-end tests of host=sandbox (bubblewrap,
// Landlock) and its escapes. The harness is internal/testkit/e2etest.
package sandbox
