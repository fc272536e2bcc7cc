// Package admin holds the operator use cases that several adapters share
// (the HTTP API, the CLI, the node host): replacing the approvals file
// and recording the change, policy explain, per-agent exec defaults,
// doctor and its fixes, and the sandbox status. Each use case is written
// once here; an adapter only translates its request and the answer.
//
// admin sits above the engine: it may import engine, never the other way.
// Functions take the home directory and read its files; none needs a
// running engine. Libraries return errors and do not log; where a step
// after the main one can fail on its own (the ledger record of a saved
// file), the result says so.
package admin
