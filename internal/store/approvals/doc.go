// Package approvals holds conch's approval state on an execution host: the
// OpenClaw-compatible approvals file ($CONCH_HOME/exec-approvals.json) and the pending
// approval requests ($CONCH_HOME/approvals/<id>.json); docs/policy.md describes both.
//
// # Approvals file
//
// [Load] reads and normalises the file; reads never write. [Resolve] gives an agent's file
// values (agents.<id> ?? agents."*" ?? defaults) and its allowlist with a source label per
// entry. [Save] replaces the file if it still has the caller's base hash ([ErrConflict]
// otherwise); [Update] is a locked read-modify-write, used by [AddAllow] (allow-always
// persistence) and [MarkUsed] (lastUsed bookkeeping). Members conch does not know are kept
// and written back, so files shared with OpenClaw survive a round trip.
//
// A file that exists but cannot be used gives an *[UnreadableError]; host execution is
// then denied with "exec denied: " + its text. A missing file is empty.
//
// # Concurrency and durability
//
// Every write of the approvals file holds an exclusive flock(2) on
// exec-approvals.json.lock, and every state change of a pending request one on
// approvals/.lock, so conch processes sharing a home never interleave a read-modify-write.
// Writes are atomic: a temporary file in the same directory (mode 0600) is written,
// fsynced and renamed over the target, then the directory is fsynced. Directories this
// package creates get mode 0700. On systems without flock the caller must ensure a single
// writer.
//
// # Pending requests
//
// A [Store] persists each request before it is announced, so that a decision never races
// an unknown id and requests survive restarts. [Store.Decide] is first-wins;
// [Store.Consume] spends an allowed request's single run; [Store.Expire] hands each timed
// out request to exactly one caller; [Store.Prune] deletes resolved records.
package approvals
