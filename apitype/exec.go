package apitype

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ExecParams are the parameters of the exec tool. Optional
// fields are pointers or empty strings when absent; the engine applies
// defaults and clamps. An `enum` tag lists a string's values (matched
// case-insensitively and lower-cased by CheckEnums).
type ExecParams struct {
	Command    string            `json:"command"`
	Workdir    string            `json:"workdir,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	YieldMs    *float64          `json:"yieldMs,omitempty" range:"0,120000,clamp,str,unit=ms"`
	Background *bool             `json:"background,omitempty"`
	Timeout    *float64          `json:"timeout,omitempty" range:"0,31536000,clamp,str,unit=s"` // 0: none
	// Notes say how the arguments were read where that differs from what
	// was sent: a number clamped into its range, a timeout implausible as
	// seconds. The engine adds them to the result's warnings.
	Notes          []string `json:"-"`
	PTY            *bool    `json:"pty,omitempty"`
	Host           string   `json:"host,omitempty" enum:"sandbox,gateway,node"`
	Security       string   `json:"security,omitempty" enum:"deny,allowlist,full"`
	Ask            string   `json:"ask,omitempty" enum:"off,on-miss,always"`
	Node           string   `json:"node,omitempty"`
	Elevated       *bool    `json:"elevated,omitempty"`
	IdempotencyKey string   `json:"idempotencyKey,omitempty"`
}

// MaxCommandBytes is the longest command exec takes: the shell gets the
// command as one argument, and Linux refuses an argument of 128 KiB or
// more (MAX_ARG_STRLEN). It also bounds the nesting the policy's parser
// recurses through (policy.MaxCommandBytes is the same).
const MaxCommandBytes = 128<<10 - 1

var execFields = map[string]bool{
	"command": true, "workdir": true, "env": true, "yieldMs": true, "background": true,
	"timeout": true, "timeoutSeconds": true, "pty": true, "host": true, "security": true,
	"ask": true, "node": true, "elevated": true, "idempotencyKey": true,
}

var idempotencyKeyRE = lazyRE(`^[A-Za-z0-9._:-]{1,128}$`)

// ParseExecParams decodes and validates exec arguments. timeoutSeconds is
// folded into Timeout; both given and different is an error.
func ParseExecParams(raw []byte) (ExecParams, *Error) {
	var p ExecParams
	m, e := fields(raw, execFields)
	if e != nil {
		return p, e
	}
	if e := decodeString(m, "command", &p.Command); e != nil {
		return p, e
	}
	p.Command = strings.TrimSpace(p.Command)
	if p.Command == "" {
		return p, Errorf(CodeInvalidArgument, "Provide a command to start.")
	}
	if len(p.Command) > MaxCommandBytes {
		return p, Errorf(CodeInvalidArgument, "Invalid parameter \"command\": %d bytes, at most %d (the kernel's limit on one argument of a process: a longer command could not be started). Write a long script to a file and run the file.", len(p.Command), MaxCommandBytes)
	}
	for _, s := range []struct {
		name string
		dst  *string
	}{{"workdir", &p.Workdir}, {"host", &p.Host}, {"security", &p.Security}, {"ask", &p.Ask}, {"node", &p.Node}, {"idempotencyKey", &p.IdempotencyKey}} {
		if e := decodeString(m, s.name, s.dst); e != nil {
			return p, e
		}
	}
	p.Workdir = strings.TrimSpace(p.Workdir)
	if r, ok := m["env"]; ok && !isNull(r) {
		if !stringMap(r, &p.Env) {
			return p, typeErr("env", "an object of strings")
		}
	}
	for _, b := range []struct {
		name string
		dst  **bool
	}{{"background", &p.Background}, {"pty", &p.PTY}, {"elevated", &p.Elevated}} {
		if e := decodeBool(m, b.name, b.dst); e != nil {
			return p, e
		}
	}
	if e := decodeNumber(m, "yieldMs", true, nil, &p.YieldMs); e != nil {
		return p, e
	}
	var t1, t2 *float64
	if e := decodeNumber(m, "timeout", true, nil, &t1); e != nil {
		return p, e
	}
	if e := decodeNumber(m, "timeoutSeconds", true, nil, &t2); e != nil {
		return p, e
	}
	// Both names share timeout's range; an error or a note names the
	// one sent.
	tr := timeoutRange()
	for _, t := range []struct {
		name string
		v    *float64
	}{{"timeout", t1}, {"timeoutSeconds", t2}} {
		if t.v != nil {
			r := tr
			r.Field = t.name
			w, note, e := r.Admit(*t.v)
			if e != nil {
				return p, e
			}
			if note != "" {
				*t.v = w
				p.Notes = append(p.Notes, note)
			}
			if w > ImplausibleTimeoutSec {
				p.Notes = append(p.Notes, fmt.Sprintf("%s %s is in seconds (%s); if milliseconds were meant, send %s.", t.name, fmtNum(w), spanText(w), fmtNum(w/1000)))
			}
		}
	}
	switch {
	case t1 != nil && t2 != nil && *t1 != *t2:
		return p, Errorf(CodeInvalidArgument, "Pass either timeout or timeoutSeconds, not both with different values.")
	case t1 != nil:
		p.Timeout = t1
	default:
		p.Timeout = t2
	}
	if e := CheckEnums(&p); e != nil {
		return p, e
	}
	if r, ok := m["idempotencyKey"]; ok && !isNull(r) && !idempotencyKeyRE().MatchString(p.IdempotencyKey) {
		return p, Errorf(CodeInvalidArgument, "Invalid idempotencyKey: use 1-128 characters of [A-Za-z0-9._:-].")
	}
	notes, e := AdmitRanges(&p, "")
	if e != nil {
		return p, e
	}
	p.Notes = append(notes, p.Notes...)
	if e := CheckRanges(&p, ""); e != nil {
		return p, e
	}
	if e := CheckStrings(&p); e != nil {
		return p, e
	}
	return p, nil
}

// ImplausibleTimeoutSec is the exec timeout (3 hours) above which a value
// is more likely milliseconds sent for seconds than a real limit: it is
// still used, and the result says so.
const ImplausibleTimeoutSec = 3 * 3600

// spanText writes a number of seconds as hours and minutes ("8 h 20 min").
func spanText(sec float64) string {
	m := int64(sec) / 60
	switch {
	case m >= 60*24*2:
		return fmt.Sprintf("%d days", m/(60*24))
	case m%60 == 0:
		return fmt.Sprintf("%d h", m/60)
	}
	return fmt.Sprintf("%d h %d min", m/60, m%60)
}

// ExecDetails is the details object of completed, failed and running exec
// results (docs/tools.md, "Results"). Fields that do not apply to a status are
// omitted; ExitCode and Signal are explicit nulls for failed runs so that a
// signal death is never read as exit 0.
type ExecDetails struct {
	Status            string   `json:"status"`
	State             string   `json:"state,omitempty"`
	SessionID         string   `json:"sessionId,omitempty"`
	Host              string   `json:"host,omitempty"`
	HostReason        string   `json:"hostReason,omitempty"`
	NodeID            string   `json:"nodeId,omitempty"`
	Warnings          []string `json:"warnings,omitempty"`
	ExitCode          *int     `json:"exitCode"`
	Signal            *string  `json:"signal"`
	KilledBy          *string  `json:"killedBy"`
	TimedOut          *bool    `json:"timedOut,omitempty"`
	Reason            string   `json:"reason,omitempty"`
	DurationMs        *int64   `json:"durationMs,omitempty"`
	Aggregated        *string  `json:"aggregated,omitempty"`
	Cwd               string   `json:"cwd,omitempty"`
	Truncated         *bool    `json:"truncated,omitempty"`
	OutputBytes       *int64   `json:"outputBytes,omitempty"`
	Cursor            int64    `json:"cursor"`
	DescendantsKilled *int     `json:"descendantsKilled,omitempty"`
	// DroppedBytes is output the journal cap dropped, UnrecordedBytes
	// output a full disk kept from the journal: both gone for good.
	DroppedBytes    int64 `json:"droppedBytes,omitempty"`
	UnrecordedBytes int64 `json:"unrecordedBytes,omitempty"`

	// UnreadableBytes counts output lost to damaged journal records.
	UnreadableBytes int64 `json:"unreadableBytes,omitempty"`

	// running only
	PID       *int    `json:"pid,omitempty"`
	StartedAt int64   `json:"startedAt,omitempty"`
	Tail      *string `json:"tail,omitempty"`
	Name      string  `json:"name,omitempty"`
	PTY       *bool   `json:"pty,omitempty"`
	Stdin     string  `json:"stdin,omitempty"`

	// Sandbox describes a host=sandbox run.
	Sandbox *SandboxInfo `json:"sandbox,omitempty"`
}

// SandboxInfo is the sandbox record of an exec result.
type SandboxInfo struct {
	Backend string   `json:"backend"`
	Scope   string   `json:"scope"`
	Layers  []string `json:"layers"`
	// Workspace is the workspace's path inside the sandbox (equal to the
	// host path unless workspacePath is /workspace or the backend is
	// docker); HostWorkspace the directory it shows.
	Workspace     string `json:"workspace"`
	HostWorkspace string `json:"hostWorkspace"`
	Cwd           string `json:"cwd"` // the working directory inside
	// Limits are the enforced limits (memoryBytes, pids, cpus).
	Limits map[string]float64 `json:"limits,omitempty"`
}

// MarshalJSON drops the explicit nulls from running results, which carry
// no exit data at all.
func (d *ExecDetails) MarshalJSON() ([]byte, error) {
	type plain ExecDetails
	b, err := json.Marshal((*plain)(d))
	if err != nil || d.Status != "running" {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, k := range []string{"exitCode", "signal", "killedBy"} {
		if string(m[k]) == "null" {
			delete(m, k)
		}
	}
	return json.Marshal(m)
}

// timeoutRange is the range of exec's timeout (and timeoutSeconds).
func timeoutRange() Range {
	for _, r := range Ranges(ExecParams{}) {
		if r.Field == "timeout" {
			return r
		}
	}
	panic("apitype: ExecParams has no timeout range")
}
