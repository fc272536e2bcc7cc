// Package proto is the supervisor's vocabulary, shared by every package
// that starts, follows or reads a session without running one: the spec
// an engine hands a supervisor (Spec, on fd 3 or over a shared supervisor's socket),
// the control socket's messages (Request, Reply, Status, Event), the
// engine's view of a started session (Handle), the end states and the
// causes of a kill (State*, KilledBy), the resource limits, and the files
// of a session directory (meta.json, exit.json and their paths), with the
// one writer of each (WriteMeta, WriteExit: files.go).
//
// It imports no conch package but leaves (fsutil, journal, keys, vt), so
// the registry, the node port and the node hub can name a session's
// records without importing the supervisor that runs it.
package proto

import (
	"encoding/json"
)

// ProtocolVersion is the version of the control protocol and of the spec
// passed on fd 3.
const ProtocolVersion = 1

// Spec is what the engine asks a supervisor to run. It travels on fd 3 of
// the supervisor as JSON, so secrets in Env never reach argv or disk.
type Spec struct {
	V  int    `json:"v"`
	ID string `json:"id"`
	// StartBy, if set, is when (unix ms) the engine stops waiting for
	// this start: a supervisor (a shared supervisor frozen or starved meanwhile) that
	// gets to the spec later does not start the command, since the
	// engine has already answered the call as not started. Shared.Commit
	// sets it.
	StartBy    int64    `json:"startBy,omitempty"`
	Agent      string   `json:"agent"`
	Name       string   `json:"name"`
	Command    string   `json:"command"`
	Argv       []string `json:"argv"`
	Env        []string `json:"env"`
	Dir        string   `json:"cwd"`
	Host       string   `json:"host"`
	HostReason string   `json:"hostReason,omitempty"`

	// PTY runs the command on a pseudo-terminal of Cols x Rows.
	PTY  bool `json:"pty"`
	Cols int  `json:"cols,omitempty"`
	Rows int  `json:"rows,omitempty"`

	// Stdin is "open" (a pipe the agent can write to), "closed" (the
	// command reads EOF at once) or "pty".
	Stdin string `json:"stdin"`

	// TimeoutMs is the wall-clock limit from the start, 0 for none.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// KillGraceMs is the pause between SIGTERM and SIGKILL.
	KillGraceMs int64 `json:"killGraceMs"`
	// SettleMs is how long output is read after the main process exits
	// before remaining descendants are killed (default 250).
	SettleMs int64 `json:"settleMs,omitempty"`

	JournalMaxBytes  int64 `json:"journalMaxBytes,omitempty"`
	JournalHeadBytes int64 `json:"journalHeadBytes,omitempty"`

	// Socket is the control socket path.
	Socket string `json:"socket"`
	// NoCgroup disables cgroup containment (tests of the fallback).
	NoCgroup bool `json:"noCgroup,omitempty"`

	IdempotencyKey string   `json:"idempotencyKey,omitempty"`
	Fingerprint    string   `json:"fingerprint,omitempty"`
	EnvKeys        []string `json:"envKeys,omitempty"`

	// Limits are the session's resource limits (nil: none); a sandbox's
	// own limits replace those of the same kind.
	Limits *Limits `json:"limits,omitempty"`

	// Sandbox is set for host=sandbox runs: Argv already wraps the
	// command in the backend (bwrap …, sandbox-init …).
	Sandbox *SandboxSpec `json:"sandbox,omitempty"`

	// State is the engine's state.json for the session, which the
	// supervisor writes (after meta.json) unless the engine already has:
	// a shared supervisor writes both late or never (see sup.flushFiles).
	State json.RawMessage `json:"state,omitempty"`
}

// SandboxSpec is the supervisor's part of a sandboxed run: the backend,
// its limits and what the child is handed (the block pipe, files).
type SandboxSpec struct {
	Backend string   `json:"backend"`
	Scope   string   `json:"scope"`
	Layers  []string `json:"layers,omitempty"`
	// Limits (0: unset), applied through the session cgroups.
	MemoryBytes int64   `json:"memoryBytes,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	// BlockFD: the child waits on fd 3 until the supervisor has placed
	// its whole tree in the limit cgroups.
	BlockFD bool `json:"blockFd,omitempty"`
	// CttyInside: with a PTY, the supervisor does not make the terminal
	// the child's controlling terminal; the in-sandbox init claims it in
	// a session of its own (sandbox-init --ctty), so that the terminal's
	// signals (C-c, C-z, C-\) reach only processes inside, not bwrap.
	CttyInside bool `json:"cttyInside,omitempty"`
	// Files are opened read-only and passed to the child from fd 4 on,
	// in order (after the block fd): bwrap's --seccomp program.
	Files []string `json:"files,omitempty"`
	// KillArgv, when set, is run by the kill sequence (and after the
	// command ended, for leftovers) with "--kill-session <id> --grace-ms
	// <ms>" appended: the in-sandbox kill of backends whose processes are
	// outside the session cgroup (docker).
	KillArgv []string `json:"killArgv,omitempty"`
}

// Handle is an engine's view of a supervisor it launched.
type Handle struct {
	// PID is the command's process id.
	PID int
	// SupervisorPID is the supervisor's process id.
	SupervisorPID int
	// Events delivers cursor updates and, last, the final end state. It is
	// closed when the supervisor closes its end (after the end state, or
	// when it dies).
	Events <-chan Event
	// Close stops the delivery of Events (the supervisor is untouched).
	Close func()
	// Warnings name sandbox limits the supervisor could not enforce.
	Warnings []string
	// Socket is the session's control socket (Meta.Socket): its own, or
	// its shared supervisor's, where requests must name the session.
	Socket string
	// Meta is the session's meta.json as the supervisor wrote it (or, in
	// a shared supervisor, will), or nil from a supervisor that did not report it.
	Meta *Meta
	// Release, when set, tells the session's shared supervisor that the engine is
	// about to remove the session's directory, so it writes nothing more
	// there. Call it only once the session has ended.
	Release func()
}
