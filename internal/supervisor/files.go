// Package supervisor owns one session's process: it is the code behind the
// hidden `conch supervise` subcommand, a small re-exec of the conch binary
// that starts the command in its own process group (and cgroup where the
// machine allows), pumps its output into the session journal, enforces the
// timeout, carries out the kill sequence, records the end state in
// exit.json, and answers a control socket. It outlives the gateway that
// started it, which is what lets sessions survive a gateway restart.
//
// The package also holds the client side used by the engine: the spawn
// handshake (Start), the control-socket client (Dial) and the files of a
// session directory (meta.json, exit.json), so both sides share one
// definition of the on-disk and on-wire formats.
package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/fsutil"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"

	"github.com/conchsh/conch/internal/journal"
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
	// this start: a supervisor (a host frozen or starved meanwhile) that
	// gets to the spec later does not start the command, since the
	// engine has already answered the call as not started. Host.Commit
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
	// a host writes both late or never (see sup.flushFiles).
	State json.RawMessage `json:"state,omitempty"`
}

// SandboxSpec is the supervisor's part of a sandboxed run: the backend, and
// the limits it sets in the session cgroup.
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
	// the sandbox's own session.
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

// SandboxMeta is meta.json's sandbox record.
type SandboxMeta struct {
	Backend string   `json:"backend"`
	Scope   string   `json:"scope"`
	Layers  []string `json:"layers,omitempty"`
	// Limits lists the enforced limits (memoryBytes, pids, cpus) and
	// Unenforced the warnings for the others.
	Limits     map[string]float64 `json:"limits,omitempty"`
	Unenforced []string           `json:"unenforced,omitempty"`
}

// Meta is meta.json, written by the supervisor.
type Meta struct {
	V                   int          `json:"v"`
	ID                  string       `json:"id"`
	Agent               string       `json:"agent"`
	Name                string       `json:"name"`
	Command             string       `json:"command"`
	Argv                []string     `json:"argv"`
	Cwd                 string       `json:"cwd"`
	Host                string       `json:"host"`
	HostReason          string       `json:"hostReason,omitempty"`
	NodeID              string       `json:"nodeId,omitempty"`
	PTY                 bool         `json:"pty"`
	Cols                int          `json:"cols,omitempty"`
	Rows                int          `json:"rows,omitempty"`
	Stdin               string       `json:"stdin"`
	State               string       `json:"state"` // starting | running
	StartedAt           int64        `json:"startedAt"`
	PID                 int          `json:"pid"`
	PGID                int          `json:"pgid"`
	PIDStartTime        uint64       `json:"pidStartTime"`
	Cgroup              *Cgroup      `json:"cgroup,omitempty"`
	SupervisorPID       int          `json:"supervisorPid"`
	SupervisorStartTime uint64       `json:"supervisorStartTime"`
	Socket              string       `json:"socket"`
	TimeoutAt           int64        `json:"timeoutAt,omitempty"`
	KillGraceMs         int64        `json:"killGraceMs"`
	IdempotencyKey      string       `json:"idempotencyKey,omitempty"`
	Fingerprint         string       `json:"fingerprint,omitempty"`
	EnvKeys             []string     `json:"envKeys,omitempty"`
	Sandbox             *SandboxMeta `json:"sandbox,omitempty"`
	// Limits are the session's resource limits in force and those that
	// are not (a sandboxed run's also in Sandbox).
	Limits *LimitsMeta `json:"limits,omitempty"`
}

// Cgroup records the cgroups a session uses.
type Cgroup struct {
	V2 string            `json:"v2,omitempty"`
	V1 map[string]string `json:"v1,omitempty"`
}

// End states.
const (
	StateExited   = "exited"
	StateSignaled = "signaled"
	StateKilled   = "killed"
	StateLost     = "lost"
	StateDenied   = "denied"
)

// Exit is exit.json, the commit point of a session's end state.
type Exit struct {
	State             string  `json:"state"`
	ExitCode          *int    `json:"exitCode"`
	Signal            *string `json:"signal"`
	KilledBy          *string `json:"killedBy"`
	TimedOut          bool    `json:"timedOut"`
	Reason            string  `json:"reason,omitempty"`
	EndedAt           int64   `json:"endedAt"`
	DurationMs        int64   `json:"durationMs"`
	DescendantsKilled int     `json:"descendantsKilled"`
	OutputBytes       int64   `json:"outputBytes"`
	OutputSha256      string  `json:"outputSha256,omitempty"`
	DroppedBytes      int64   `json:"droppedBytes"`
	// UnrecordedBytes is output read from the command that could not be
	// journaled (a full disk at a kill, or for 60 s after the end): gone
	// for good, like DroppedBytes.
	UnrecordedBytes int64 `json:"unrecordedBytes,omitempty"`
	// LimitHits, when set, says the session's limits hit a child (an OOM
	// kill the main process outlived, forks refused) though the command
	// was not ended by them.
	LimitHits *LimitHits `json:"limitHits,omitempty"`
	// Final is false for the first record written right after the main
	// process was reaped, true once descendants are gone and the output
	// pumps have finished (the journal is fsynced right after).
	Final bool `json:"final"`
}

// Paths of a session directory.
func MetaPath(dir string) string        { return filepath.Join(dir, "meta.json") }
func ExitPath(dir string) string        { return filepath.Join(dir, "exit.json") }
func LogPath(dir string) string         { return filepath.Join(dir, "supervisor.log") }
func SessionDir(home, id string) string { return filepath.Join(home, "sessions", id) }

// JournalDir returns where the session in dir keeps its journal: in dir
// itself, or in dir/journal for a session made by an earlier conch (one
// inode less per session; the segment names cannot clash with the other
// files of the directory).
func JournalDir(dir string) string {
	old := filepath.Join(dir, "journal")
	if fi, err := os.Stat(old); err == nil && fi.IsDir() {
		return old
	}
	return dir
}

// WriteJSON replaces path atomically: it writes path.tmp with mode 0600 and
// renames it over path, so a reader (in any process, also after this one
// crashed) sees either the old or the new content. It does not fsync: see
// Persist for the files that must also survive a machine crash.
func WriteJSON(path string, v any) error { return writeJSON(path, v, false) }

// WriteJSONDurable is WriteJSON followed by fsyncs of the file and its
// directory before the rename is reported.
func WriteJSONDurable(path string, v any) error { return writeJSON(path, v, true) }

// CreateJSON writes v to path, which must not exist, in place: for the
// first record of a directory nobody reads before it is complete (a torn
// file can only mean the writer died before it went on). It saves the
// rename of WriteJSON.
func CreateJSON(path string, v any) error {
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	return writeFile(path, os.O_EXCL, b, false)
}

// Persist fsyncs an already written file and its directory.
func Persist(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	fsutil.SyncDir(filepath.Dir(path))
	return err
}

func writeJSON(path string, v any, durable bool) error {
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	return fsutil.Write(path, b, fsutil.Options{Perm: 0o600, NoSync: !durable})
}

// writeFile writes b to path, opened with mode 0600 and O_WRONLY|O_CREATE
// plus flag, fsyncing it if durable; on failure path is removed.
func writeFile(path string, flag int, b []byte, durable bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// ErrDamaged marks a state file that exists but cannot be trusted: cut
// short, not JSON, or its checksum does not match.
var ErrDamaged = errors.New("file damaged")

// checksumKey is the last member of every JSON object the writers here
// write: the CRC-32C of the file's text without it (see encodeJSON).
const checksumKey = `"crc32c": "`

// encodeJSON returns v as indented JSON and a newline. An object gets a
// last member "crc32c": the CRC-32C (Castagnoli, 8 hex digits) of the
// indented object without that member, so a reader can tell a file cut
// short or with a changed byte from a good one. Any other value (a list)
// is written as the member listKey of such an object, which ReadJSON
// unwraps. A file without the checksum member (written by an earlier
// conch) is still read; only a damage that breaks its JSON shows then.
func encodeJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		if b, err = json.MarshalIndent(map[string]json.RawMessage{listKey: b}, "", "  "); err != nil {
			return nil, err
		}
	}
	sum := fmt.Sprintf("%08x", crc32.Checksum(b, crcTable))
	out := make([]byte, 0, len(b)+32)
	if string(b) == "{}" {
		out = append(out, "{\n  "...)
	} else {
		out = append(out, b[:len(b)-2]...) // drop "\n}"
		out = append(out, ",\n  "...)
	}
	out = append(out, checksumKey...)
	out = append(out, sum...)
	return append(out, "\"\n}\n"...), nil
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// listKey holds a value that is not an object in a checksummed file.
const listKey = "conchList"

// checksumLine matches the last line of a checksummed object whatever its
// key's bytes, so that a changed byte in the key is caught too rather than
// turning the file into one without a checksum.
var checksumLine = regexp.MustCompile(`(?s)\A(.*)(,\n  |\{\n  )"([^\n]{6})": "([^\n]{8})"\n\}\n\z`)

// verifyJSON checks b as written by encodeJSON and returns the JSON text
// without the checksum member. ok is false for a checksum that does not
// match; a text without one is returned as it is.
func verifyJSON(b []byte) (text []byte, ok bool) {
	m := checksumLine.FindSubmatch(b)
	if m == nil {
		if bytes.Contains(b, []byte(checksumKey)) {
			return nil, false // cut short or changed around the member
		}
		return b, true
	}
	var orig []byte
	if string(m[2]) == "{\n  " {
		if len(m[1]) > 0 {
			return nil, false
		}
		orig = []byte("{}")
	} else {
		orig = append(append([]byte(nil), m[1]...), "\n}"...)
	}
	if `"`+string(m[3])+`": "` != checksumKey {
		return nil, false
	}
	return orig, fmt.Sprintf("%08x", crc32.Checksum(orig, crcTable)) == string(m[4])
}

// ReadJSON reads a JSON file written by WriteJSON or CreateJSON into v. A
// missing file is reported with an error wrapping fs.ErrNotExist; a file
// cut short, not JSON, or whose checksum does not match, with one wrapping
// ErrDamaged (v may then be partly filled).
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text, ok := verifyJSON(b)
	if !ok {
		return fmt.Errorf("%s: checksum mismatch: %w", filepath.Base(path), ErrDamaged)
	}
	if !json.Valid(text) {
		return fmt.Errorf("%s: not valid JSON (%d bytes): %w", filepath.Base(path), len(b), ErrDamaged)
	}
	if len(text) > 0 && text[0] == '{' && bytes.Contains(text, []byte(`"`+listKey+`"`)) {
		var w map[string]json.RawMessage
		if json.Unmarshal(text, &w) == nil && len(w) == 1 && w[listKey] != nil {
			text = w[listKey]
		}
	}
	if err := json.Unmarshal(text, v); err != nil {
		return fmt.Errorf("decode %s: %v: %w", filepath.Base(path), err, ErrDamaged)
	}
	return nil
}

// ReadExit returns the session's exit record, or ok=false when the session
// has none yet (running or lost). When exit.json is damaged (ErrDamaged) it
// falls back on the copy the supervisor appended to the journal when the
// session ended: then ok is true and err still reports the damage, so a
// caller can log it and repair the file; without that copy ok is false.
func ReadExit(dir string) (e Exit, ok bool, err error) {
	err = ReadJSON(ExitPath(dir), &e)
	if errors.Is(err, os.ErrNotExist) {
		return e, false, nil
	}
	if errors.Is(err, ErrDamaged) {
		e = Exit{}
		if b, _, found, jerr := journal.ReadEnd(JournalDir(dir)); jerr == nil && found && json.Unmarshal(b, &e) == nil && e.State != "" {
			return e, true, fmt.Errorf("%w; recovered from the journal's end record", err)
		}
		return Exit{}, false, err
	}
	return e, err == nil, err
}
