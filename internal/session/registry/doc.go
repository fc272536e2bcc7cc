// Package registry holds the bookkeeping of one conch home that is not
// the tools' semantics: the idempotency store (IdemStore), exec admission
// under quotas.maxRunning (Admission) and the exec rate limits (Limiter),
// and the pool of session directories with session-id reservation
// (DirPool).
//
// It sits below the engine and never imports it: where a decision needs
// the engine's session table (is a session still live, how many run), the
// caller passes a function. Every type here is safe for concurrent use and
// documents which of its callbacks run under its own lock; callers must
// not call back into the same value from such a callback.
package registry
