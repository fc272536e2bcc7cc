// Package ui holds the end-to-end tests of the control UI in headless
// Chromium (skipped with the reason when Chromium is missing). The harness
// is internal/testkit/e2etest.
package ui
