package apitype

// Notice is an exec event for an agent: sent to MCP clients as
// notifications/message data and on the event stream as exec.notice.
type Notice struct {
	Kind       string `json:"kind"` // completed | failed | denied | running | finished
	Text       string `json:"text"`
	SessionID  string `json:"sessionId,omitempty"`
	ApprovalID string `json:"approvalId,omitempty"`
}

// DiskStatus is the home's state as exec sees it (the disk member of GET
// /v1/health): its free space, and whether exec refuses new sessions
// (Code, the error it refuses with).
type DiskStatus struct {
	// Full: out of space (Code disk_full).
	Full bool `json:"full"`
	// Unwritable: cannot be written for another reason (Code
	// home_unwritable).
	Unwritable   bool   `json:"unwritable"`
	Code         string `json:"code,omitempty"`
	FreeBytes    int64  `json:"freeBytes"`
	ReserveBytes int64  `json:"reserveBytes"`
	FreeInodes   int64  `json:"freeInodes,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// Refusing reports whether exec refuses new sessions.
func (d DiskStatus) Refusing() bool { return d.Code != "" }

// ExecDefaults are the operator's per-agent exec defaults: the answer of
// GET and PUT /v1/agents/{id}/exec-defaults, and an agent's entry of
// $CONCH_HOME/state/exec-defaults.json.
type ExecDefaults struct {
	Host     string `json:"host,omitempty"`
	Security string `json:"security,omitempty"`
	Ask      string `json:"ask,omitempty"`
	Node     string `json:"node,omitempty"`
}

// GateStatus says whether the policy gate judges an agent's commands at
// all, where they run and why. `conch policy explain` prints it before
// the verdict (the gate member of POST /v1/policy/explain) and `conch
// doctor` warns from it; the engine computes it with the host resolution
// exec's plan uses, so that neither can claim a gate the runs do not have.
type GateStatus struct {
	// Host is where the agent's commands run when a call names no host:
	// gateway, sandbox or node.
	Host string `json:"host"`
	// HostSource is what set the host: "exec defaults",
	// "agents.<id>.tools.exec.host", "tools.exec.host", "sandbox.mode"
	// or "" (the built-in default).
	HostSource string `json:"hostSource"`
	// Applies is true when the gate judges the commands: host gateway
	// configured explicitly, or a node (whose own gate judges them).
	Applies bool `json:"applies"`
	// Ungated is true when the commands run on this machine with nothing
	// judging them: no configured host with sandboxing off, or host
	// gateway resolving to security=full ask=off.
	Ungated bool `json:"ungated"`
	// Reason is why, one clause for people (Line puts the state first).
	Reason string `json:"reason"`
}

// Line is the status as one line: the state, then why.
func (g GateStatus) Line() string {
	switch {
	case g.Applies && g.Host == "node":
		return "applies on the node: " + g.Reason
	case g.Applies && g.Ungated:
		return "applies but lets every command run: " + g.Reason
	case g.Applies:
		return "applies: " + g.Reason
	}
	return "not applied: " + g.Reason
}

// Finding is one result of `conch doctor`: an element of the findings of
// GET /v1/doctor.
type Finding struct {
	ID      string `json:"id"`
	Level   string `json:"level"` // info | warn | error
	Message string `json:"message"`
}

// SandboxStatus is the answer of GET /v1/sandbox (and what `conch sandbox
// status|list` print).
type SandboxStatus struct {
	Agents      []SandboxAgent     `json:"agents"`
	LandlockABI int                `json:"landlockAbi"`
	Containers  []SandboxContainer `json:"containers"`
	DockerError string             `json:"dockerError,omitempty"`
}

// SandboxAgent is one agent's sandbox in a SandboxStatus.
type SandboxAgent struct {
	Agent   string   `json:"agent"`
	Mode    string   `json:"mode"`
	On      bool     `json:"on"`
	Scope   string   `json:"scope"`
	Backend string   `json:"backend,omitempty"`
	Layers  []string `json:"layers,omitempty"`
	// Gaps says what the backend cannot enforce that bwrap does
	// (seatbelt's session limits, system call filter, …).
	Gaps            []string `json:"gaps,omitempty"`
	WorkspaceAccess string   `json:"workspaceAccess"`
	Network         string   `json:"network"`
	Error           string   `json:"error,omitempty"`
}

// SandboxContainer is one conch sandbox container (a backend whose
// sandboxes outlive a run: docker).
type SandboxContainer struct {
	Name       string `json:"name"`
	Scope      string `json:"scope"`
	Running    bool   `json:"running"`
	CreatedAt  int64  `json:"createdAtMs"`
	ConfigHash string `json:"configHash"`
	Status     string `json:"status"`
}
