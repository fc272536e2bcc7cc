// Package config loads conch's configuration file ($CONCH_HOME/config.json,
// docs/configure.md) and resolves the effective exec settings of an agent:
// the agent's override wins key by key over the global value, which wins
// over the environment fallbacks, which win over the built-in defaults.
//
// The file is strict JSON: unknown keys and values of the wrong type are
// errors at load. Sections that later parts of conch own (server, sandbox,
// approvals, ledger, log, mcp, quotas) are accepted and kept raw until
// those parts read them.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conchsh/conch/apitype"
)

// Config is the whole file. The zero value is the default configuration.
type Config struct {
	// Schema is the "$schema" key editors use to find the file's JSON
	// Schema (conch config schema); conch ignores its value.
	Schema    string                 `json:"$schema,omitempty"`
	Tools     Tools                  `json:"tools"`
	Agents    map[string]AgentConfig `json:"agents,omitempty"`
	Sessions  Sessions               `json:"sessions"`
	Quotas    Quotas                 `json:"quotas"`
	Server    json.RawMessage        `json:"server,omitempty"`
	Sandbox   Sandbox                `json:"sandbox"`
	Approvals ApprovalSettings       `json:"approvals"`
	Ledger    LedgerSettings         `json:"ledger"`
	Log       json.RawMessage        `json:"log,omitempty"`
	MCP       MCP                    `json:"mcp"`
}

// MCP is the "mcp" section.
type MCP struct {
	// FullDetails keeps "aggregated" in structured results (default false).
	FullDetails bool `json:"fullDetails,omitempty"`
	// InlineEvents prefixes tool results with undelivered exec events
	// (default true).
	InlineEvents *bool `json:"inlineEvents,omitempty"`
}

// Tools is the "tools" section.
type Tools struct {
	Exec     Exec            `json:"exec"`
	Deny     []string        `json:"deny,omitempty"`
	Elevated json.RawMessage `json:"elevated,omitempty"`
}

// Sessions is the "sessions" section.
type Sessions struct {
	// Survive keeps sessions running when the engine stops (default true).
	Survive *bool `json:"survive,omitempty"`
	// DiskReserveBytes is the free space of the home's filesystem below
	// which exec refuses new sessions with disk_full (default: a tenth of
	// the filesystem, at most 8 MiB; 0 turns the reserve off, the first
	// failed write still counts).
	DiskReserveBytes *int64 `json:"diskReserveBytes,omitempty"`
}

// AgentConfig is agents.<id>.
type AgentConfig struct {
	Workspace string          `json:"workspace,omitempty"`
	Tools     *Tools          `json:"tools,omitempty"`
	Elevated  json.RawMessage `json:"elevated,omitempty"`
	Sandbox   *Sandbox        `json:"sandbox,omitempty"`
	Quotas    *Quotas         `json:"quotas,omitempty"`
	Approvals json.RawMessage `json:"approvals,omitempty"`
}

// Quotas is the "quotas" section; nil fields are unset.
type Quotas struct {
	MaxRunning    *int     `json:"maxRunning,omitempty"`
	MaxRetained   *int     `json:"maxRetained,omitempty"`
	JournalBytes  *int64   `json:"journalBytes,omitempty"`
	ExecPerSecond *float64 `json:"execPerSecond,omitempty"`
	ExecBurst     *float64 `json:"execBurst,omitempty"`
	// MinRetainAgeMs is how long a finished session whose result nobody
	// read is kept even past maxRetained.
	MinRetainAgeMs *int64 `json:"minRetainAgeMs,omitempty"`
	// Session holds the resource limits of each of the agent's sessions.
	Session *SessionLimits `json:"session,omitempty"`
}

// SessionLimits is quotas.session: the resource limits each session
// gets through its cgroups; nil fields keep the default, 0 turns a limit
// off. agents.<id>.quotas.session overrides it key by key.
type SessionLimits struct {
	MemoryBytes *int64 `json:"memoryBytes,omitempty"`
	Pids        *int64 `json:"pids,omitempty"`
	CPUWeight   *int64 `json:"cpuWeight,omitempty"`
}

// SessionLimitSettings are an agent's resolved session limits (0: none).
type SessionLimitSettings struct {
	MemoryBytes int64 // bytes of memory for the whole tree
	Pids        int64 // tasks (processes and threads) alive at once
	CPUWeight   int64 // share of CPU under contention, 1 to 10000
}

// The defaults of quotas.session. A session may use half of the
// machine's memory (RAM/2, at least 256 MiB; no default where the memory
// cannot be read): one runaway command cannot take the machine down,
// and builds that need gigabytes still fit on an ordinary machine. 4096
// tasks hold a parallel build's compilers and their threads, and stop a
// fork bomb long before the kernel's pid limit. No CPU weight by default:
// a v1 cpu cgroup per session made every exec round trip 1.6 to 2.1 times
// slower where this was measured (BenchmarkExecSessionLimits), and a
// weight of 100 is what the kernel gives anyway; an operator who wants
// agents' commands to yield to the rest of the machine sets a lower one.
const (
	DefaultSessionPids      = 4096
	DefaultSessionCPUWeight = 0
	minSessionMemory        = 256 << 20
	maxCPUWeight            = 10000
)

// DefaultSessionMemoryBytes is quotas.session.memoryBytes' default: half
// of the machine's memory, at least 256 MiB, or 0 (none) when it cannot
// be read.
func DefaultSessionMemoryBytes() int64 {
	ram := totalRAM()
	if ram <= 0 {
		return 0
	}
	return max(ram/2, minSessionMemory)
}

func (l *SessionLimits) validate(prefix string) error {
	if l == nil {
		return nil
	}
	var errs []error
	if l.MemoryBytes != nil && *l.MemoryBytes != 0 && *l.MemoryBytes < minMemoryBytes {
		errs = append(errs, fmt.Errorf("%s.memoryBytes: %d is below 1 MiB (0 means no limit)", prefix, *l.MemoryBytes))
	}
	if l.Pids != nil && *l.Pids < 0 {
		errs = append(errs, fmt.Errorf("%s.pids: %d is negative (0 means no limit)", prefix, *l.Pids))
	}
	if l.CPUWeight != nil && (*l.CPUWeight < 0 || *l.CPUWeight > maxCPUWeight) {
		errs = append(errs, fmt.Errorf("%s.cpuWeight: %d is out of range (1 to 10000; 0 means the kernel's default)", prefix, *l.CPUWeight))
	}
	return errors.Join(errs...)
}

// QuotaSettings are an agent's resolved quotas.
type QuotaSettings struct {
	MaxRunning    int     // 0: no limit
	MaxRetained   int     // finished sessions kept; 0: no limit
	JournalBytes  int64   // journal bytes on disk; 0: no limit
	ExecPerSecond float64 // 0: no rate limit
	ExecBurst     float64
	// MinRetainAge: a finished session is evicted by maxRetained only
	// once its result was read or it ended this long ago.
	MinRetainAge time.Duration
	// Session are the resource limits of each session.
	Session SessionLimitSettings
}

// DefaultMinRetainAge is quotas.minRetainAgeMs when unset.
const DefaultMinRetainAge = time.Hour

// Quota resolves agent's quotas: agents.<id>.quotas key by key over the
// global section over the defaults (256 running, 512 retained, 50 exec/s,
// burst 200, unread results kept at least 1 h).
func (c *Config) Quota(agent string) QuotaSettings {
	q := QuotaSettings{MaxRunning: 256, MaxRetained: 512, JournalBytes: 1 << 30, ExecPerSecond: 50, ExecBurst: 200, MinRetainAge: DefaultMinRetainAge,
		Session: SessionLimitSettings{MemoryBytes: DefaultSessionMemoryBytes(), Pids: DefaultSessionPids, CPUWeight: DefaultSessionCPUWeight}}
	apply := func(s *Quotas) {
		if s == nil {
			return
		}
		if s.MaxRunning != nil {
			q.MaxRunning = max(*s.MaxRunning, 0)
		}
		if s.ExecPerSecond != nil {
			q.ExecPerSecond = max(*s.ExecPerSecond, 0)
		}
		if s.MaxRetained != nil {
			q.MaxRetained = max(*s.MaxRetained, 0)
		}
		if s.JournalBytes != nil {
			q.JournalBytes = max(*s.JournalBytes, 0)
		}
		if s.ExecBurst != nil {
			q.ExecBurst = max(*s.ExecBurst, 1)
		}
		if s.MinRetainAgeMs != nil {
			q.MinRetainAge = time.Duration(max(*s.MinRetainAgeMs, 0)) * time.Millisecond
		}
		if l := s.Session; l != nil {
			if l.MemoryBytes != nil {
				q.Session.MemoryBytes = max(*l.MemoryBytes, 0)
			}
			if l.Pids != nil {
				q.Session.Pids = max(*l.Pids, 0)
			}
			if l.CPUWeight != nil {
				q.Session.CPUWeight = min(max(*l.CPUWeight, 0), maxCPUWeight)
			}
		}
	}
	apply(&c.Quotas)
	if a, ok := c.Agents[agent]; ok {
		apply(a.Quotas)
	}
	return q
}

// Exec is tools.exec. Pointer fields are unset when nil.
type Exec struct {
	Host                     string            `json:"host,omitempty"`
	Security                 string            `json:"security,omitempty"`
	Ask                      string            `json:"ask,omitempty"`
	Node                     string            `json:"node,omitempty"`
	AskFallback              string            `json:"askFallback,omitempty"`
	NonInteractiveEnv        map[string]string `json:"nonInteractiveEnv,omitempty"`
	PromptIdleMs             *int64            `json:"promptIdleMs,omitempty"`
	PathPrepend              []string          `json:"pathPrepend,omitempty"`
	SafeBins                 []string          `json:"safeBins,omitempty"`
	SafeBinTrustedDirs       []string          `json:"safeBinTrustedDirs,omitempty"`
	SafeBinProfiles          json.RawMessage   `json:"safeBinProfiles,omitempty"`
	StrictInlineEval         *bool             `json:"strictInlineEval,omitempty"`
	BackgroundMs             *int64            `json:"backgroundMs,omitempty"`
	TimeoutSec               *float64          `json:"timeoutSec,omitempty"`
	BackgroundTimeoutSec     *float64          `json:"backgroundTimeoutSec,omitempty"`
	KillGraceMs              *int64            `json:"killGraceMs,omitempty"`
	PTY                      *bool             `json:"pty,omitempty"`
	CleanupMs                *int64            `json:"cleanupMs,omitempty"`
	IdempotencyTtlMs         *int64            `json:"idempotencyTtlMs,omitempty"`
	NotifyOnExit             *bool             `json:"notifyOnExit,omitempty"`
	NotifyOnExitEmptySuccess *bool             `json:"notifyOnExitEmptySuccess,omitempty"`
	ApprovalRunningNoticeMs  *int64            `json:"approvalRunningNoticeMs,omitempty"`
	MaxOutputChars           *int              `json:"maxOutputChars,omitempty"`
	PendingMaxOutputChars    *int              `json:"pendingMaxOutputChars,omitempty"`
	JournalMaxBytes          *int64            `json:"journalMaxBytes,omitempty"`
	JournalHeadBytes         *int64            `json:"journalHeadBytes,omitempty"`
	ApplyPatch               *ApplyPatch       `json:"applyPatch,omitempty"`
}

// ApplyPatch is tools.exec.applyPatch; nil fields are
// unset.
type ApplyPatch struct {
	// Enabled lists and accepts the apply_patch tool (default false).
	Enabled *bool `json:"enabled,omitempty"`
	// WorkspaceOnly keeps every path inside the workspace (default true).
	WorkspaceOnly *bool `json:"workspaceOnly,omitempty"`
	// AllowModels is accepted for compatibility with OpenClaw and ignored:
	// conch does not see the model.
	AllowModels []string `json:"allowModels,omitempty"`
}

// ApplyPatchSettings are an agent's resolved apply_patch settings.
type ApplyPatchSettings struct {
	Enabled       bool
	WorkspaceOnly bool
	AllowModels   []string
}

// ApplyPatch resolves tools.exec.applyPatch for agent: the agent's keys
// win one by one over the global ones.
func (c *Config) ApplyPatch(agent string) ApplyPatchSettings {
	s := ApplyPatchSettings{WorkspaceOnly: true}
	apply := func(a *ApplyPatch) {
		if a == nil {
			return
		}
		if a.Enabled != nil {
			s.Enabled = *a.Enabled
		}
		if a.WorkspaceOnly != nil {
			s.WorkspaceOnly = *a.WorkspaceOnly
		}
		if a.AllowModels != nil {
			s.AllowModels = a.AllowModels
		}
	}
	apply(c.Tools.Exec.ApplyPatch)
	if a, ok := c.Agents[agent]; ok && a.Tools != nil {
		apply(a.Tools.Exec.ApplyPatch)
	}
	return s
}

// ApplyPatchOffered reports whether agent gets the apply_patch tool: it
// is enabled and neither exec nor apply_patch is in the agent's
// tools.deny.
func (c *Config) ApplyPatchOffered(agent string) bool {
	return c.ApplyPatch(agent).Enabled && !c.Denied(agent, "exec") && !c.Denied(agent, "apply_patch")
}

// Load reads a configuration file. A missing file is the default
// configuration, not an error.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(b)
}

// ErrInvalid is wrapped by every error of Parse (and so of Load, for a
// file that exists): the configuration is not valid JSON of the schema, or
// a value is out of range. Commands map it to one exit code.
var ErrInvalid = errors.New("invalid configuration")

// invalidError is a Parse failure: "config: <why>", unwrapping to
// ErrInvalid and to the cause.
type invalidError struct{ err error }

func (e *invalidError) Error() string   { return "config: " + e.err.Error() }
func (e *invalidError) Unwrap() []error { return []error{ErrInvalid, e.err} }

// Parse decodes a configuration strictly.
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, &invalidError{err}
	}
	if dec.More() {
		return nil, &invalidError{errors.New("trailing data after the JSON object")}
	}
	if err := c.validate(); err != nil {
		return nil, &invalidError{err}
	}
	return &c, nil
}

var agentID = lazyRE(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidAgent reports whether id is a valid agent id.
func ValidAgent(id string) bool { return agentID().MatchString(id) }

func oneOf(key, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, strings.ToLower(v)) {
		return nil
	}
	return fmt.Errorf("%s: invalid value %q (want one of %s)", key, v, strings.Join(allowed, ", "))
}

// HostValues are the host names tools.exec.host and exec's host accept,
// in the order the docs list them. config is a leaf and cannot ask the
// host registry (internal/host), so this list is kept here and checked
// against the registry by internal/host's tests (TestHostListsMatchRegistry);
// every other list of host names is derived from it.
func HostValues() []string { return slices.Clone(hostValues) }

// SandboxBackends are the values sandbox.backend accepts: "auto" and
// every registered backend (checked against internal/host/sandbox's registry
// by internal/host's tests).
func SandboxBackends() []string { return slices.Clone(sandboxBackends) }

// The allowed values of the enumerated keys: validate checks them and
// Schema lists them.
var (
	hostValues           = []string{"sandbox", "gateway", "node"}
	securityValues       = []string{"deny", "allowlist", "full"}
	askValues            = []string{"off", "on-miss", "always"}
	toolNames            = []string{"exec", "process", "apply_patch"}
	ledgerScopeValues    = []string{"all", "gated"}
	forwardNetworkValues = []string{"unixgram", "unix", "udp", "tcp", "journald"}
)

func (e Exec) validate(prefix string) error {
	return errors.Join(
		oneOf(prefix+".host", e.Host, hostValues...),
		oneOf(prefix+".security", e.Security, securityValues...),
		oneOf(prefix+".ask", e.Ask, askValues...),
		oneOf(prefix+".askFallback", e.AskFallback, securityValues...),
		nodeBinding(prefix+".node", e.Node),
	)
}

// nodeBinding checks a node binding: one a run can match (never an id
// prefix, never a name no node can hold).
func nodeBinding(key, v string) error {
	if v == "" {
		return nil
	}
	if err := apitype.ValidNodeBinding(v); err != nil {
		return fmt.Errorf("%s: %v", key, err)
	}
	return nil
}

// validateRetained checks that agent's resolved quotas keep at least as
// many finished sessions as may run at once: else a burst of background
// sessions that all end loses results before anyone reads them.
func (c *Config) validateRetained(where, agent string) error {
	q := c.Quota(agent)
	if q.MaxRetained > 0 && q.MaxRunning > 0 && q.MaxRetained < q.MaxRunning {
		return fmt.Errorf("%s: maxRetained (%d) must be at least maxRunning (%d), or 0 for no limit", where, q.MaxRetained, q.MaxRunning)
	}
	return nil
}

func (c *Config) validate() (err error) {
	errs := []error{c.Tools.Exec.validate("tools.exec"), oneOf("ledger.scope", c.Ledger.Scope, ledgerScopeValues...), c.Ledger.Forward.validate(), c.Sandbox.validate("sandbox")}
	defer func() {
		if err == nil {
			err = c.validateKube()
		}
	}()
	for _, d := range c.Tools.Deny {
		if strings.TrimSpace(d) == "" {
			errs = append(errs, errors.New("tools.deny: empty entry"))
		}
		errs = append(errs, oneOf("tools.deny", strings.TrimSpace(d), toolNames...))
	}
	errs = append(errs, c.validateRetained("quotas", ""), c.Quotas.Session.validate("quotas.session"))
	for id, a := range c.Agents {
		if !ValidAgent(id) {
			errs = append(errs, fmt.Errorf("agents: invalid agent id %q", id))
		}
		if a.Quotas != nil {
			errs = append(errs, c.validateRetained("agents."+id+".quotas", id), a.Quotas.Session.validate("agents."+id+".quotas.session"))
		}
		if a.Sandbox != nil {
			errs = append(errs, a.Sandbox.validate("agents."+id+".sandbox"))
		}
		if a.Tools != nil {
			errs = append(errs, a.Tools.Exec.validate("agents."+id+".tools.exec"))
			for _, d := range a.Tools.Deny {
				errs = append(errs, oneOf("agents."+id+".tools.deny", strings.TrimSpace(d), toolNames...))
			}
		}
	}
	return errors.Join(errs...)
}

// Denied reports whether agent's tool policy (tools.deny, overridden by
// agents.<id>.tools.deny) denies tool.
func (c *Config) Denied(agent, tool string) bool {
	deny := c.Tools.Deny
	if a, ok := c.Agents[agent]; ok && a.Tools != nil && a.Tools.Deny != nil {
		deny = a.Tools.Deny
	}
	for _, d := range deny {
		if strings.EqualFold(strings.TrimSpace(d), tool) {
			return true
		}
	}
	return false
}

// Elicitation reports approvals.elicitation for agent (default true;
// agents.<id>.approvals.elicitation overrides the global value).
func (c *Config) Elicitation(agent string) bool {
	if a, ok := c.Agents[agent]; ok && len(a.Approvals) > 0 {
		var ov struct {
			Elicitation *bool `json:"elicitation"`
		}
		if json.Unmarshal(a.Approvals, &ov) == nil && ov.Elicitation != nil {
			return *ov.Elicitation
		}
	}
	return c.Approvals.Elicitation == nil || *c.Approvals.Elicitation
}

// InlineEvents reports mcp.inlineEvents (default true).
func (c *Config) InlineEvents() bool { return c.MCP.InlineEvents == nil || *c.MCP.InlineEvents }

// ExecSettings are the resolved tools.exec values for one agent, with
// defaults and clamps applied (docs/configure.md lists them).
type ExecSettings struct {
	Host                     string // "" = implicit (sandbox)
	Node                     string // node binding (agent > global), "" = none
	Yield                    time.Duration
	Timeout                  time.Duration // 0 = none
	BackgroundTimeout        time.Duration // 0 = none
	KillGrace                time.Duration
	PTY                      bool
	Cleanup                  time.Duration
	NotifyOnExit             bool
	NotifyOnExitEmptySuccess bool
	MaxOutputChars           int
	PendingMaxOutputChars    int
	JournalMaxBytes          int64
	JournalHeadBytes         int64
	NonInteractiveEnv        map[string]string
	PathPrepend              []string
	Workspace                string
	DenyProcess              bool

	// Policy; "" = unset.
	Security           string
	Ask                string
	AskFallback        string
	SafeBins           []string // nil = built-in default
	SafeBinTrustedDirs []string // global and agent lists unioned
	SafeBinProfiles    map[string]json.RawMessage
	StrictInlineEval   bool
	// ApprovalRunningNotice is tools.exec.approvalRunningNoticeMs (<= 0
	// disables the notice).
	ApprovalRunningNotice time.Duration
	// IdempotencyTTL is tools.exec.idempotencyTtlMs (milliseconds).
	IdempotencyTTL int64
	// PromptIdle is tools.exec.promptIdleMs (default 1500, [200, 60000]).
	PromptIdle time.Duration
}

// DefaultMaxOutputChars is the default of tools.exec.maxOutputChars, the
// cap on the output text of an exec result.
const DefaultMaxOutputChars = 16000

// DefaultNonInteractiveEnv is tools.exec.nonInteractiveEnv's default.
var DefaultNonInteractiveEnv = map[string]string{
	"GIT_TERMINAL_PROMPT": "0", "GCM_INTERACTIVE": "never", "PAGER": "cat", "GIT_PAGER": "cat",
	"MANPAGER": "cat", "DEBIAN_FRONTEND": "noninteractive", "PIP_NO_INPUT": "1",
}

func clampInt64(v, lo, hi int64) int64 { return max(lo, min(hi, v)) }

// envInt returns the first of the named environment variables that parses
// as an integer.
func envInt(names ...string) (int64, bool) {
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			if i, err := strconv.ParseInt(v, 10, 64); err == nil {
				return i, true
			}
		}
	}
	return 0, false
}

// Exec resolves the exec settings of agent.
func (c *Config) Exec(agent string) ExecSettings {
	g := c.Tools.Exec
	var a Exec
	deny := c.Tools.Deny
	ac, ok := c.Agents[agent]
	if ok && ac.Tools != nil {
		a = ac.Tools.Exec
		if ac.Tools.Deny != nil {
			deny = ac.Tools.Deny
		}
	}
	pick64 := func(av, gv *int64) *int64 {
		if av != nil {
			return av
		}
		return gv
	}
	pickF := func(av, gv *float64) *float64 {
		if av != nil {
			return av
		}
		return gv
	}
	pickB := func(av, gv *bool, def bool) bool {
		if av != nil {
			return *av
		}
		if gv != nil {
			return *gv
		}
		return def
	}
	pickI := func(av, gv *int) *int {
		if av != nil {
			return av
		}
		return gv
	}
	s := ExecSettings{Workspace: ac.Workspace}
	s.Host = g.Host
	s.Node = g.Node
	if a.Node != "" {
		s.Node = a.Node
	}
	if a.Host != "" {
		s.Host = a.Host
	}
	// Yield: config, then CONCH_YIELD_MS, then PI_BASH_YIELD_MS, then 10 s.
	yield := int64(10000)
	if v := pick64(a.BackgroundMs, g.BackgroundMs); v != nil {
		yield = *v
	} else if v, ok := envInt("CONCH_YIELD_MS", "PI_BASH_YIELD_MS"); ok {
		yield = v
	}
	s.Yield = time.Duration(clampInt64(yield, 10, 120000)) * time.Millisecond
	s.Timeout = 1800 * time.Second
	if v := pickF(a.TimeoutSec, g.TimeoutSec); v != nil {
		s.Timeout = secs(*v)
	}
	if v := pickF(a.BackgroundTimeoutSec, g.BackgroundTimeoutSec); v != nil {
		s.BackgroundTimeout = secs(*v)
	}
	grace := int64(3000)
	if v := pick64(a.KillGraceMs, g.KillGraceMs); v != nil {
		grace = clampInt64(*v, 0, 60000)
	}
	s.KillGrace = time.Duration(grace) * time.Millisecond
	s.PTY = pickB(a.PTY, g.PTY, false)
	cleanup := int64(1800000)
	if v := pick64(a.CleanupMs, g.CleanupMs); v != nil {
		cleanup = *v
	} else if v, ok := envInt("CONCH_JOB_TTL_MS", "PI_BASH_JOB_TTL_MS"); ok {
		cleanup = v
	}
	s.Cleanup = time.Duration(clampInt64(cleanup, 60000, 10800000)) * time.Millisecond
	s.NotifyOnExit = pickB(a.NotifyOnExit, g.NotifyOnExit, true)
	s.NotifyOnExitEmptySuccess = pickB(a.NotifyOnExitEmptySuccess, g.NotifyOnExitEmptySuccess, false)
	// 16000 characters: about 8,000 tokens for digit-heavy output (seq
	// measures about 1.9 characters per token), about 4,000 for prose,
	// under the 10,000-token warning of common MCP clients. OpenClaw's
	// 200000 stays reachable through the key.
	maxOut := int64(DefaultMaxOutputChars)
	if v := pickI(a.MaxOutputChars, g.MaxOutputChars); v != nil {
		maxOut = int64(*v)
	} else if v, ok := envInt("CONCH_MAX_OUTPUT_CHARS", "PI_BASH_MAX_OUTPUT_CHARS"); ok {
		maxOut = v
	}
	s.MaxOutputChars = int(clampInt64(maxOut, 1000, 200000))
	pend := int64(30000)
	if v := pickI(a.PendingMaxOutputChars, g.PendingMaxOutputChars); v != nil {
		pend = int64(*v)
	} else if v, ok := envInt("CONCH_PENDING_MAX_OUTPUT_CHARS", "OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS"); ok {
		pend = v
	}
	s.PendingMaxOutputChars = int(clampInt64(pend, 1000, int64(s.MaxOutputChars)))
	jmax := int64(64 << 20)
	if v := pick64(a.JournalMaxBytes, g.JournalMaxBytes); v != nil {
		jmax = clampInt64(*v, 1<<20, 4<<30)
	}
	s.JournalMaxBytes = jmax
	jhead := int64(1 << 20)
	if v := pick64(a.JournalHeadBytes, g.JournalHeadBytes); v != nil {
		jhead = *v
	}
	s.JournalHeadBytes = clampInt64(jhead, 0, jmax/4)
	s.NonInteractiveEnv = DefaultNonInteractiveEnv
	if a.NonInteractiveEnv != nil {
		s.NonInteractiveEnv = a.NonInteractiveEnv
	} else if g.NonInteractiveEnv != nil {
		s.NonInteractiveEnv = g.NonInteractiveEnv
	}
	s.PathPrepend = g.PathPrepend
	if a.PathPrepend != nil {
		s.PathPrepend = a.PathPrepend
	}
	for _, d := range deny {
		if strings.EqualFold(strings.TrimSpace(d), "process") {
			s.DenyProcess = true
		}
	}
	pickS := func(av, gv string) string {
		if av != "" {
			return strings.ToLower(av)
		}
		return strings.ToLower(gv)
	}
	s.Security = pickS(a.Security, g.Security)
	s.Ask = pickS(a.Ask, g.Ask)
	s.AskFallback = pickS(a.AskFallback, g.AskFallback)
	s.SafeBins = g.SafeBins
	if a.SafeBins != nil {
		s.SafeBins = a.SafeBins
	}
	s.SafeBinTrustedDirs = append(append([]string{}, g.SafeBinTrustedDirs...), a.SafeBinTrustedDirs...)
	s.SafeBinProfiles = map[string]json.RawMessage{}
	for _, raw := range []json.RawMessage{g.SafeBinProfiles, a.SafeBinProfiles} {
		var m map[string]json.RawMessage
		if len(raw) > 0 && json.Unmarshal(raw, &m) == nil {
			for k, v := range m {
				s.SafeBinProfiles[strings.ToLower(k)] = v
			}
		}
	}
	s.StrictInlineEval = pickB(a.StrictInlineEval, g.StrictInlineEval, false)
	notice := int64(10000)
	if v := pick64(a.ApprovalRunningNoticeMs, g.ApprovalRunningNoticeMs); v != nil {
		notice = *v
	}
	s.ApprovalRunningNotice = time.Duration(notice) * time.Millisecond
	pi := int64(1500)
	if v := pick64(a.PromptIdleMs, g.PromptIdleMs); v != nil {
		pi = clampInt64(*v, 200, 60000)
	}
	s.PromptIdle = time.Duration(pi) * time.Millisecond
	s.IdempotencyTTL = 600000
	if v := pick64(a.IdempotencyTtlMs, g.IdempotencyTtlMs); v != nil {
		s.IdempotencyTTL = max(*v, 0)
	}
	return s
}

// ApprovalSettings is the "approvals" section.
type ApprovalSettings struct {
	TimeoutMs               *int64 `json:"timeoutMs,omitempty"`
	Elicitation             *bool  `json:"elicitation,omitempty"`
	FailFastWithoutApprover *bool  `json:"failFastWithoutApprover,omitempty"`
}

// ApprovalTimeout is approvals.timeoutMs (default 120 s, clamp [10 s, 24 h]).
func (c *Config) ApprovalTimeout() time.Duration {
	ms := int64(120000)
	if c.Approvals.TimeoutMs != nil {
		ms = clampInt64(*c.Approvals.TimeoutMs, 10000, 86400000)
	}
	return time.Duration(ms) * time.Millisecond
}

// LedgerSettings is the "ledger" section.
type LedgerSettings struct {
	Scope       string `json:"scope,omitempty"` // all | gated
	RotateBytes int64  `json:"rotateBytes,omitempty"`
	// Forward sends every record and signed checkpoint to syslog or journald
	// (ledger.forward); nil: no forwarding. Read when the engine starts.
	Forward *LedgerForward `json:"forward,omitempty"`
}

// LedgerForward is ledger.forward.
type LedgerForward struct {
	// Network is unixgram (default), unix, udp, tcp or journald.
	Network string `json:"network,omitempty"`
	// Address is a socket path or host:port; default /dev/log, or
	// /run/systemd/journal/socket for journald. Required for udp and tcp.
	Address string `json:"address,omitempty"`
	// Tag is the syslog tag (default conch-ledger).
	Tag string `json:"tag,omitempty"`
}

func (f *LedgerForward) validate() error {
	if f == nil {
		return nil
	}
	if err := oneOf("ledger.forward.network", f.Network, forwardNetworkValues...); err != nil {
		return err
	}
	if n := strings.ToLower(f.Network); (n == "udp" || n == "tcp") && f.Address == "" {
		return fmt.Errorf("ledger.forward.address: network %s needs host:port", n)
	}
	return nil
}

// secs converts fractional seconds to a duration (ms = floor(s*1000));
// values <= 0 mean "none" and give 0.
func secs(v float64) time.Duration {
	if v <= 0 {
		return 0
	}
	return time.Duration(int64(v*1000)) * time.Millisecond
}

// ServerList returns a string list of the server section
// (allowedHosts, allowedOrigins).
func (c *Config) ServerList(key string) []string {
	var m map[string]json.RawMessage
	if len(c.Server) == 0 || json.Unmarshal(c.Server, &m) != nil {
		return nil
	}
	var out []string
	json.Unmarshal(m[key], &out)
	return out
}

// Survive reports whether sessions outlive the engine (sessions.survive).
func (c *Config) Survive() bool {
	return c.Sessions.Survive == nil || *c.Sessions.Survive
}

// ServerUI reports server.ui (default true): whether conch serve serves
// the control UI.
func (c *Config) ServerUI() bool {
	var m struct {
		UI *bool `json:"ui"`
	}
	if len(c.Server) == 0 || json.Unmarshal(c.Server, &m) != nil || m.UI == nil {
		return true
	}
	return *m.UI
}
