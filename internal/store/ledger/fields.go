package ledger

// Typed Fields for each record type. They are a convenience: any value
// that encodes to a JSON object with these members, a map[string]any included, works as
// Record.Fields. Optional members are left out when empty.

// Evaluate is the Fields of a TypeEvaluate record: a policy evaluation of a host exec.
type Evaluate struct {
	RequestID   string    `json:"requestId"`
	Host        string    `json:"host"`
	NodeID      string    `json:"nodeId,omitempty"`
	Command     string    `json:"command"`
	Cwd         string    `json:"cwd"`
	EnvKeys     []string  `json:"envKeys"`
	EnvHash     string    `json:"envHash"`
	Security    string    `json:"security"`
	Ask         string    `json:"ask"`
	AskFallback string    `json:"askFallback"`
	Analysis    string    `json:"analysis"` // "ok" or the reason analysis failed
	Segments    []Segment `json:"segments"`
	Outcome     string    `json:"outcome"` // "run", "prompt" or "deny"
	Elevated    bool      `json:"elevated"`
}

// Segment is one analysed segment in an Evaluate record.
type Segment struct {
	Text     string `json:"text"`
	Exe      string `json:"exe"`
	RealPath string `json:"realPath"`
	SHA256   string `json:"sha256"`
	Verdict  string `json:"verdict"`
	Rule     string `json:"rule"`
}

// Request is the Fields of a TypeRequest record: an approval was requested.
type Request struct {
	RequestID   string   `json:"requestId"`
	ApprovalID  string   `json:"approvalId"`
	Slug        string   `json:"slug"`
	ExpiresAtMs int64    `json:"expiresAtMs"`
	Routes      []string `json:"routes"`
}

// Decision is the Fields of a TypeDecision record: an approval was resolved.
type Decision struct {
	ApprovalID string   `json:"approvalId"`
	Decision   string   `json:"decision"` // "allow-once", "allow-always", "deny", "timeout" or "dropped" (its run can no longer happen)
	DecidedBy  string   `json:"decidedBy"`
	Fallback   string   `json:"fallback,omitempty"` // askFallback applied on timeout
	Persisted  []string `json:"persisted"`          // patterns allow-always added
}

// Exec is the Fields of a TypeExec record: a command was started.
type Exec struct {
	RequestID  string    `json:"requestId"`
	ApprovalID string    `json:"approvalId,omitempty"`
	SessionID  string    `json:"sessionId"`
	Host       string    `json:"host"`
	HostReason string    `json:"hostReason,omitempty"`
	NodeID     string    `json:"nodeId,omitempty"`
	Argv       []string  `json:"argv"`
	Pinned     bool      `json:"pinned,omitempty"`
	Cwd        string    `json:"cwd"`
	Exe        ExeDigest `json:"exe"`
	EnvHash    string    `json:"envHash"`
	PTY        bool      `json:"pty"`
	TimeoutMs  int64     `json:"timeoutMs"`
	Sandbox    string    `json:"sandbox,omitempty"`
}

// ExeDigest is an executable and the sha256 of its content.
type ExeDigest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// End is the Fields of a TypeEnd record: a session ended.
type End struct {
	SessionID         string `json:"sessionId"`
	State             string `json:"state"`
	ExitCode          *int   `json:"exitCode"` // null when killed by a signal or never started
	Signal            string `json:"signal"`
	KilledBy          string `json:"killedBy"`
	DurationMs        int64  `json:"durationMs"`
	OutputBytes       int64  `json:"outputBytes"`
	OutputSHA256      string `json:"outputSha256"`
	DescendantsKilled int    `json:"descendantsKilled"`
	// Observed marks an end recorded after the fact by an engine that
	// found the session ended (it ended while no engine ran): the state
	// is the supervisor's record (exit.json), EndedAtMs when it ended.
	Observed  bool  `json:"observed,omitempty"`
	EndedAtMs int64 `json:"endedAtMs,omitempty"`
}

// Policy is the Fields of a TypePolicy record: a policy file changed.
type Policy struct {
	File    string   `json:"file"`
	OldHash string   `json:"oldHash"`
	NewHash string   `json:"newHash"`
	By      string   `json:"by"`
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
}

// Node is the Fields of a TypeNode record: a node was paired, approved, renamed or
// removed.
type Node struct {
	Action string `json:"action"` // "pair", "approve", "rename" or "remove"
	NodeID string `json:"nodeId"`
	Name   string `json:"name"`
	By     string `json:"by"`
}

// Patch is the Fields of a TypePatch record: apply_patch changed files.
type Patch struct {
	Host        string      `json:"host"`
	NodeID      string      `json:"nodeId,omitempty"`
	SessionID   string      `json:"sessionId,omitempty"`
	PatchSHA256 string      `json:"patchSha256"`
	Files       []PatchFile `json:"files"`
}

// PatchFile is one file a patch touched.
type PatchFile struct {
	Path         string `json:"path"`
	Op           string `json:"op"`
	SHA256Before string `json:"sha256Before"`
	SHA256After  string `json:"sha256After"`
}
