package apitype

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
)

// Process actions.
var ProcessActions = []string{"list", "poll", "log", "wait", "search", "screen", "write", "send-keys", "submit", "paste", "kill", "clear", "remove"}

// ProcessParams are the parameters of the process tool. Optional numbers
// are pointers so that "absent" and "0" differ.
type ProcessParams struct {
	Action     string   `json:"action"`
	SessionID  string   `json:"sessionId,omitempty"`
	Data       string   `json:"data,omitempty" nul:"ok"`
	EOF        *bool    `json:"eof,omitempty"`
	Keys       []string `json:"keys,omitempty"`
	Hex        []string `json:"hex,omitempty"`
	Literal    string   `json:"literal,omitempty" nul:"ok"`
	DelayMs    *float64 `json:"delayMs,omitempty" range:"0,1000,clamp,unit=ms"`
	Text       string   `json:"text,omitempty" nul:"ok"`
	Bracketed  *bool    `json:"bracketed,omitempty"`
	Offset     *float64 `json:"offset,omitempty" range:"0,9007199254740992,int,clamp,unit=lines"`
	Limit      *float64 `json:"limit,omitempty" range:"0,9007199254740992,int,clamp,unit=lines"`
	Since      *float64 `json:"since,omitempty" range:"0,9007199254740992,int,clamp,unit=bytes"`
	Raw        *bool    `json:"raw,omitempty"`
	Stream     string   `json:"stream,omitempty" enum:"both,stdout,stderr"`
	Timeout    *float64 `json:"timeout,omitempty" range:"0,600000,clamp,str,unit=ms;poll=0,120000"`
	Until      []string `json:"until,omitempty"`
	UntilArray bool     `json:"-"` // until was given as an array
	Pattern    string   `json:"pattern,omitempty" nul:"ok"`
	IgnoreCase *bool    `json:"ignoreCase,omitempty"`
	Host       string   `json:"host,omitempty"`
	Port       *float64 `json:"port,omitempty" range:"1,65535,int"`
	URL        string   `json:"url,omitempty"`
	Path       string   `json:"path,omitempty"`
	IdleMs     *float64 `json:"idleMs,omitempty" range:"100,3600000,clamp,unit=ms"`
	Context    *float64 `json:"context,omitempty" range:"0,20,int,clamp,unit=lines"`
	Max        *float64 `json:"max,omitempty" range:"1,1000,int,clamp,unit=matches"`

	// Notes say how numbers were clamped into their ranges; the engine
	// adds them to the result's text.
	Notes []string `json:"-"`
}

var processFields = map[string]bool{
	"action": true, "sessionId": true, "data": true, "eof": true, "keys": true, "hex": true,
	"literal": true, "delayMs": true, "text": true, "bracketed": true, "offset": true, "limit": true,
	"since": true, "raw": true, "stream": true, "timeout": true, "until": true, "pattern": true,
	"ignoreCase": true, "host": true, "port": true, "url": true, "path": true, "idleMs": true,
	"context": true, "max": true,
}

// processRanges maps each numeric process field to its range.
var processRanges = sync.OnceValue(func() map[string]Range {
	rs := map[string]Range{}
	for _, r := range Ranges(ProcessParams{}) {
		rs[r.Field] = r
	}
	return rs
})

// ParseProcessParams decodes process arguments. A missing or blank action
// is reported as required, with the list of actions; an unknown one with
// OpenClaw's text `Unknown action <x>`.
func ParseProcessParams(raw []byte) (ProcessParams, *Error) {
	var p ProcessParams
	m, e := fields(raw, processFields)
	if e != nil {
		return p, e
	}
	for _, s := range []struct {
		name string
		dst  *string
	}{{"action", &p.Action}, {"sessionId", &p.SessionID}, {"data", &p.Data}, {"literal", &p.Literal},
		{"text", &p.Text}, {"stream", &p.Stream}, {"pattern", &p.Pattern}, {"host", &p.Host},
		{"url", &p.URL}, {"path", &p.Path}} {
		if e := decodeString(m, s.name, s.dst); e != nil {
			return p, e
		}
	}
	p.Action = strings.TrimSpace(p.Action)
	known := false
	for _, a := range ProcessActions {
		if p.Action == a {
			known = true
		}
	}
	switch {
	case p.Action == "":
		return p, Errorf(CodeInvalidArgument, "action is required: one of %s.", strings.Join(ProcessActions, ", "))
	case !known:
		return p, Errorf(CodeInvalidArgument, "Unknown action %s", p.Action)
	}
	p.SessionID = strings.TrimSpace(p.SessionID)
	for _, b := range []struct {
		name string
		dst  **bool
	}{{"eof", &p.EOF}, {"bracketed", &p.Bracketed}, {"raw", &p.Raw}, {"ignoreCase", &p.IgnoreCase}} {
		if e := decodeBool(m, b.name, b.dst); e != nil {
			return p, e
		}
	}
	if e := checkActionFields(m, p.Action); e != nil {
		return p, e
	}
	// Numbers only, except where the reference takes a numeric string
	// (timeout, tagged str): a model confusing process's milliseconds
	// with exec's seconds ("30s") is told the unit instead of guessed at.
	ranges := processRanges()
	for _, n := range []struct {
		name string
		dst  **float64
	}{{"delayMs", &p.DelayMs}, {"offset", &p.Offset}, {"limit", &p.Limit}, {"since", &p.Since},
		{"timeout", &p.Timeout}, {"port", &p.Port}, {"idleMs", &p.IdleMs}, {"context", &p.Context}, {"max", &p.Max}} {
		r := ranges[n.name].For(p.Action)
		if e := decodeNumber(m, n.name, r.Str, &r, n.dst); e != nil {
			return p, e
		}
	}
	if e := decodeStrings(m, "keys", &p.Keys); e != nil {
		return p, e
	}
	if e := decodeStrings(m, "hex", &p.Hex); e != nil {
		return p, e
	}
	if r, ok := m["until"]; ok && !isNull(r) {
		var one string
		if json.Unmarshal(r, &one) == nil {
			p.Until = []string{one}
		} else if stringArray(r, &p.Until) {
			p.UntilArray = true
		} else {
			return p, typeErr("until", "a string or an array of strings")
		}
	}
	if e := CheckEnums(&p); e != nil {
		return p, e
	}
	notes, e := AdmitRanges(&p, p.Action)
	if e != nil {
		return p, e
	}
	p.Notes = notes
	if e := CheckRanges(&p, p.Action); e != nil {
		return p, e
	}
	if e := CheckStrings(&p); e != nil {
		return p, e
	}
	return p, nil
}

// StatusDetails is the details object of the simple process actions
// (write, send-keys, submit, paste, kill, clear, remove).
type StatusDetails struct {
	Status    string  `json:"status"`
	SessionID string  `json:"sessionId,omitempty"`
	Name      string  `json:"name,omitempty"`
	State     string  `json:"state,omitempty"`
	KilledBy  string  `json:"killedBy,omitempty"`
	Signal    *string `json:"signal,omitempty"`
	Cursor    *int64  `json:"cursor,omitempty"`
}

// PollDetails is the details object of poll.
type PollDetails struct {
	Status        string    `json:"status"`
	State         string    `json:"state"`
	SessionID     string    `json:"sessionId"`
	Name          string    `json:"name"`
	Cursor        int64     `json:"cursor"`
	ExitCode      *int      `json:"exitCode,omitempty"`
	Signal        *string   `json:"signal,omitempty"`
	KilledBy      *string   `json:"killedBy,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	ApprovalID    string    `json:"approvalId,omitempty"`
	AwaitingInput *Awaiting `json:"awaitingInput,omitempty"`
	SkippedChars  int       `json:"skippedChars,omitempty"`
	SkippedBytes  int64     `json:"skippedBytes,omitempty"`
	RetryInMs     int       `json:"retryInMs,omitempty"`

	// UnreadableBytes counts output lost to damaged journal records.
	UnreadableBytes int64 `json:"unreadableBytes,omitempty"`
	// View is "screen" when the text is the terminal's screen (a PTY
	// program that draws with cursor addressing or the alternate screen).
	View string `json:"view,omitempty"`
	// Truncated says output is gone for good (OutputLoss) or unreadable.
	Truncated bool `json:"truncated,omitempty"`
	OutputLoss
}

// OutputLoss is a session's output gone for good, reported alike by every
// view of the session (exec's result, poll, log, list): what the journal
// cap dropped, and what a full or unwritable conch home kept from being
// recorded (known once the session ended).
type OutputLoss struct {
	DroppedBytes    int64 `json:"droppedBytes,omitempty"`
	UnrecordedBytes int64 `json:"unrecordedBytes,omitempty"`
}

// Lost reports whether any output is gone for good.
func (l OutputLoss) Lost() bool { return l.DroppedBytes > 0 || l.UnrecordedBytes > 0 }

// LogDetails is the details object of log.
type LogDetails struct {
	Status       string  `json:"status"`
	State        string  `json:"state"`
	SessionID    string  `json:"sessionId"`
	Name         string  `json:"name"`
	Total        int     `json:"total"`
	TotalLines   int     `json:"totalLines"`
	TotalChars   int     `json:"totalChars"`
	Truncated    bool    `json:"truncated"`
	DroppedLines int64   `json:"droppedLines"`
	Cursor       int64   `json:"cursor"`
	SkippedBytes int64   `json:"skippedBytes,omitempty"`
	ExitCode     *int    `json:"exitCode,omitempty"`
	Signal       *string `json:"signal,omitempty"`
	ExitSignal   *string `json:"exitSignal,omitempty"`
	KilledBy     *string `json:"killedBy,omitempty"`

	// UnreadableBytes counts output lost to damaged journal records
	// (shown as "[… N bytes unreadable …]" lines); Truncated is then set.
	UnreadableBytes int64 `json:"unreadableBytes,omitempty"`
	// OutputLoss: Truncated is set too.
	OutputLoss
	// View is "screen" when the text is the terminal's screen (see
	// PollDetails.View).
	View string `json:"view,omitempty"`
	// More reports a page that stopped at the output budget
	// (tools.exec.maxOutputChars) before the end of the lines asked for;
	// the text then ends with a hint naming the next page. A page read
	// with since continues from Cursor, one read with offset from
	// NextOffset, with no line lost or repeated. Such a page stops reading
	// where it stopped: Total, TotalLines and TotalChars then count the
	// lines read up to there, not to the end.
	More bool `json:"more,omitempty"`
	// NextOffset is the offset of the next page of an offset page that
	// stopped at the budget.
	NextOffset *int `json:"nextOffset,omitempty"`
}

// SessionEntry is one session in list results.
type SessionEntry struct {
	SessionID         string    `json:"sessionId"`
	Agent             string    `json:"agent,omitempty"`
	Status            string    `json:"status"`
	State             string    `json:"state"`
	PID               *int      `json:"pid"`
	StartedAt         int64     `json:"startedAt"`
	EndedAt           *int64    `json:"endedAt,omitempty"`
	RuntimeMs         int64     `json:"runtimeMs"`
	DurationMs        *int64    `json:"durationMs,omitempty"`
	Cwd               string    `json:"cwd"`
	Command           string    `json:"command"`
	Name              string    `json:"name"`
	Tail              string    `json:"tail"`
	Truncated         bool      `json:"truncated"`
	ExitCode          *int      `json:"exitCode,omitempty"`
	Signal            *string   `json:"signal,omitempty"`
	ExitSignal        *string   `json:"exitSignal,omitempty"`
	KilledBy          *string   `json:"killedBy,omitempty"`
	DescendantsKilled *int      `json:"descendantsKilled,omitempty"`
	ApprovalID        string    `json:"approvalId,omitempty"`
	Reason            string    `json:"reason,omitempty"`
	AwaitingInput     *Awaiting `json:"awaitingInput,omitempty"`
	Host              string    `json:"host"`
	NodeID            string    `json:"nodeId,omitempty"`
	PTY               bool      `json:"pty"`
	Backgrounded      bool      `json:"backgrounded"`
	Cursor            int64     `json:"cursor"`
	// OutputLoss: Truncated is set when any output is gone for good.
	OutputLoss
}

// ListDetails is the details object of list.
type ListDetails struct {
	Status   string         `json:"status"`
	Sessions []SessionEntry `json:"sessions"`
}

// Awaiting reports a session that seems to wait for input: it has been
// silent for the prompt idle time and its last line looks like a prompt.
type Awaiting struct {
	Prompt string `json:"prompt"`
	IdleMs int64  `json:"idleMs"`
}

// ProcessActionFields lists, for each process action, the fields it
// reads besides action: the one table behind the "used by" column of the
// docs, the refusal of a field an action would ignore, and the tests
// that generate each action × field pair.
var ProcessActionFields = map[string][]string{
	"list":      {},
	"poll":      {"sessionId", "since", "raw", "stream", "timeout"},
	"log":       {"sessionId", "offset", "limit", "since", "raw", "stream"},
	"wait":      {"sessionId", "since", "timeout", "until", "pattern", "ignoreCase", "host", "port", "url", "path", "idleMs"},
	"search":    {"sessionId", "since", "stream", "pattern", "ignoreCase", "context", "max"},
	"screen":    {"sessionId"},
	"write":     {"sessionId", "data", "eof"},
	"send-keys": {"sessionId", "keys", "hex", "literal", "delayMs"},
	"submit":    {"sessionId", "data"},
	"paste":     {"sessionId", "text", "bracketed"},
	"kill":      {"sessionId"},
	"clear":     {"sessionId"},
	"remove":    {"sessionId"},
}

// checkActionFields refuses a field that action does not read, so that
// nothing a caller sends is dropped without a word. A field holding its
// zero value (null, false, "", 0, [] or {}) changes nothing and passes:
// clients that send every field of the schema with its default work.
func checkActionFields(m map[string]json.RawMessage, action string) *Error {
	uses := map[string]bool{"action": true}
	for _, f := range ProcessActionFields[action] {
		uses[f] = true
	}
	var bad []string
	for k, r := range m {
		if !uses[k] && !zeroJSON(r) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	takes := strings.Join(ProcessActionFields[action], ", ")
	if takes == "" {
		takes = "no other field"
	}
	var users []string
	for _, a := range ProcessActions {
		for _, f := range ProcessActionFields[a] {
			if f == bad[0] {
				users = append(users, a)
			}
		}
	}
	return Errorf(CodeInvalidArgument, "Parameter %q does not apply to action %s, which would ignore it (%s takes: %s; %q is for: %s).",
		bad[0], action, action, takes, bad[0], strings.Join(users, ", "))
}

// zeroJSON reports whether r is null or the zero value of its type.
func zeroJSON(r json.RawMessage) bool {
	switch strings.TrimSpace(string(r)) {
	case "", "null", "false", `""`, "[]", "{}":
		return true
	}
	var f float64
	return json.Unmarshal(r, &f) == nil && f == 0
}
