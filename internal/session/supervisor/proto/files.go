package proto

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/journal"
)

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
	// NotRecorded is set, in memory only, on an end state that could not
	// be written to exit.json (the error, in words): the process holding
	// it knows how the session ended, and a restart will not, so a result
	// that reports it says so rather than claim a recorded end.
	NotRecorded string `json:"-"`
	// Final is false for the first record written right after the main
	// process was reaped, true once descendants are gone and the output
	// pumps have finished (the journal is fsynced right after).
	Final bool `json:"final"`
}

// Paths of a session directory. The files are written only through the
// writers below (WriteMeta, WriteExit, WriteExitDurable, PersistExit,
// CreateState, WriteState), whoever writes them: the supervisor, the
// engine (the end states no supervisor records: denied, lost, a repair)
// and the node hub (a node session's mirror). archtest enforces it. The
// writers' errors name the file.
func MetaPath(dir string) string        { return filepath.Join(dir, "meta.json") }
func ExitPath(dir string) string        { return filepath.Join(dir, "exit.json") }
func StatePath(dir string) string       { return filepath.Join(dir, "state.json") }
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

// WriteMeta replaces the meta.json of the session in dir (atomically,
// not fsynced: a machine crash may lose it, never tear it).
func WriteMeta(dir string, m Meta) error {
	return fsutil.WriteJSON(MetaPath(dir), m)
}

// WriteExit replaces the exit.json of the session in dir (atomically, not
// fsynced: see WriteExitDurable and PersistExit).
func WriteExit(dir string, e Exit) error {
	return fsutil.WriteJSON(ExitPath(dir), e)
}

// WriteExitDurable is WriteExit with the file and its directory fsynced
// before it returns: for an end state nothing else records (denied).
func WriteExitDurable(dir string, e Exit) error {
	return fsutil.WriteJSONDurable(ExitPath(dir), e)
}

// PersistExit fsyncs the exit.json WriteExit wrote, and its directory.
func PersistExit(dir string) error {
	return fsutil.Persist(ExitPath(dir))
}

// CreateState writes the first state.json of the session in dir, which
// must not have one (an error wrapping fs.ErrExist otherwise). Its
// content is the engine's (the supervisor passes on the engine's bytes,
// Spec.State); this package only owns the file.
func CreateState(dir string, v any) error {
	return fsutil.CreateJSON(StatePath(dir), v)
}

// WriteState replaces the state.json of the session in dir (atomically,
// not fsynced).
func WriteState(dir string, v any) error {
	return fsutil.WriteJSON(StatePath(dir), v)
}

// ReadExit returns the session's exit record, or ok=false when the session
// has none yet (running or lost). When exit.json is damaged (ErrDamaged) it
// falls back on the copy the supervisor appended to the journal when the
// session ended: then ok is true and err still reports the damage, so a
// caller can log it and repair the file; without that copy ok is false.
func ReadExit(dir string) (e Exit, ok bool, err error) {
	err = fsutil.ReadJSON(ExitPath(dir), &e)
	if errors.Is(err, os.ErrNotExist) {
		return e, false, nil
	}
	if errors.Is(err, fsutil.ErrDamaged) {
		e = Exit{}
		if b, _, found, jerr := journal.ReadEnd(JournalDir(dir)); jerr == nil && found && json.Unmarshal(b, &e) == nil && e.State != "" {
			return e, true, fmt.Errorf("%w; recovered from the journal's end record", err)
		}
		return Exit{}, false, err
	}
	return e, err == nil, err
}

// ReadOutput calls fn for the output of the session in dir from cursor
// since on (journal.Read) and returns the cursor where the journal ends.
// It is the read side of a session's output for readers outside the
// engine (a node host streaming a session to its gateway), which go
// through it rather than the directory's layout.
func ReadOutput(dir string, since int64, fn func(journal.Chunk) error) (end int64, err error) {
	return journal.Read(JournalDir(dir), since, fn)
}
