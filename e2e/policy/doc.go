// Package policy holds the end-to-end tests of the policy gate:
// approvals, safe bins, the ledger, apply_patch and the surprises a gated
// command may hold. The harness is internal/testkit/e2etest.
package policy
