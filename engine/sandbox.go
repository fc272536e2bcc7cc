package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/sandbox"
	"github.com/conchsh/conch/internal/supervisor"
)

// sandboxUnavailable is the fail-closed error of hosts.md §1 (text of
// exec.md §8.6).
var sandboxUnavailable = host.SandboxUnavailable

// SandboxAgent is one agent's sandbox in `conch sandbox status`.
type SandboxAgent struct {
	Agent           string   `json:"agent"`
	Mode            string   `json:"mode"`
	On              bool     `json:"on"`
	Scope           string   `json:"scope"`
	Backend         string   `json:"backend,omitempty"`
	Layers          []string `json:"layers,omitempty"`
	WorkspaceAccess string   `json:"workspaceAccess"`
	Network         string   `json:"network"`
	Error           string   `json:"error,omitempty"`
}

// SandboxStatus is GET /v1/sandbox and `conch sandbox status|list`.
type SandboxStatus struct {
	Agents      []SandboxAgent      `json:"agents"`
	LandlockABI int                 `json:"landlockAbi"`
	Containers  []sandbox.Container `json:"containers"`
	DockerError string              `json:"dockerError,omitempty"`
}

func sandboxAgents(cfg *config.Config) []string {
	agents := []string{"main"}
	for id := range cfg.Agents {
		if id != "main" {
			agents = append(agents, id)
		}
	}
	sort.Strings(agents[1:])
	return agents
}

// SandboxStatusOf reports the sandbox of every configured agent and the
// docker containers (hosts.md §3, interfaces.md `conch sandbox`).
func SandboxStatusOf(ctx context.Context, home string) (SandboxStatus, error) {
	cfg, err := config.Load(filepath.Join(home, "config.json"))
	if err != nil {
		return SandboxStatus{}, err
	}
	st := SandboxStatus{LandlockABI: sandbox.LandlockABI(), Containers: []sandbox.Container{}}
	for _, a := range sandboxAgents(cfg) {
		sb := cfg.SandboxFor(a)
		row := SandboxAgent{Agent: a, Mode: sb.Mode, On: sb.On, Scope: sb.Scope, WorkspaceAccess: sb.WorkspaceAccess, Network: sb.Network}
		if sb.On {
			if b, err := sandbox.For(ctx, sb); err != nil {
				row.Error = err.Error()
			} else {
				row.Backend, row.Layers = b.Name(), b.Layers(&sandbox.Run{Settings: sb})
			}
		}
		st.Agents = append(st.Agents, row)
	}
	d := &sandbox.Docker{}
	if err := d.Available(ctx); err != nil {
		st.DockerError = err.Error()
	} else if cs, err := d.List(ctx); err != nil {
		st.DockerError = err.Error()
	} else {
		st.Containers = cs
	}
	return st, nil
}

// SandboxRecreate removes the docker container of agent's scope (or of
// every scope with all), so the next run creates it with the current
// configuration. It returns the containers removed.
func SandboxRecreate(ctx context.Context, home, agent string, all bool) ([]string, error) {
	d := &sandbox.Docker{}
	if err := d.Available(ctx); err != nil {
		return nil, fmt.Errorf("docker: %w (only docker sandboxes are recreated; bwrap and landlock sandboxes are made fresh for every run)", err)
	}
	cs, err := d.List(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(filepath.Join(home, "config.json"))
	if err != nil {
		return nil, err
	}
	want := ""
	if !all {
		want = sandbox.ContainerName(cfg.SandboxFor(agent).Scope)
	}
	removed := []string{}
	for _, c := range cs {
		if all || c.Name == want {
			if err := d.Remove(ctx, c.Scope); err != nil {
				return removed, err
			}
			removed = append(removed, c.Name)
		}
	}
	return removed, nil
}

// SandboxPrune removes idle or old docker sandboxes now (hosts.md §3.3).
func SandboxPrune(ctx context.Context, home string) ([]string, error) {
	d := &sandbox.Docker{}
	if err := d.Available(ctx); err != nil {
		return nil, fmt.Errorf("docker: %w (nothing to prune: bwrap and landlock keep no containers)", err)
	}
	cfg, err := config.Load(filepath.Join(home, "config.json"))
	if err != nil {
		return nil, err
	}
	ds := cfg.SandboxFor("main").Docker
	hours := func(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }
	gone, err := d.Prune(ctx, hours(ds.IdleHours), hours(ds.MaxAgeDays*24))
	if gone == nil {
		gone = []string{}
	}
	return gone, err
}

// sandboxInnerPID returns a process inside a running bwrap session's
// namespaces (for wait probes), or 0 for every other session.
func (e *Engine) sandboxInnerPID(s *session) int {
	s.mu.Lock()
	m := s.meta
	s.mu.Unlock()
	if m.Sandbox == nil || m.Sandbox.Backend != "bwrap" {
		return 0
	}
	return sandbox.InnerPID(supervisor.SessionPids(m))
}

// sandboxCwd is the working directory inside a bwrap session (its
// --chdir).
func (e *Engine) sandboxCwd(s *session) string {
	s.mu.Lock()
	m := s.meta
	s.mu.Unlock()
	for i, a := range m.Argv {
		if a == "--chdir" && i+1 < len(m.Argv) {
			return m.Argv[i+1]
		}
		if a == "--" {
			break
		}
	}
	return m.Cwd
}

// elevatedLevel resolves policy.md §9 for an agent whose sandboxing is
// on: "" (off), "ask" or "full", or the error for a request that is not
// allowed.
func (e *Engine) elevatedLevel(agent string, req *bool) (string, *apitype.Error) {
	cfg := e.conf()
	enabled := true
	var glob struct {
		Enabled *bool `json:"enabled"`
	}
	if len(cfg.Tools.Elevated) > 0 && json.Unmarshal(cfg.Tools.Elevated, &glob) == nil && glob.Enabled != nil {
		enabled = *glob.Enabled
	}
	var ag struct {
		Allow   *bool  `json:"allow"`
		Default string `json:"default"`
	}
	if a, ok := cfg.Agents[agent]; ok && len(a.Elevated) > 0 {
		json.Unmarshal(a.Elevated, &ag)
	}
	allow := ag.Allow != nil && *ag.Allow
	def := strings.ToLower(ag.Default)
	if def != "ask" && def != "full" {
		def = "off"
	}
	switch {
	case req == nil:
		if enabled && allow && def != "off" {
			return def, nil
		}
		return "", nil
	case !*req:
		return "", nil
	}
	if !enabled || !allow {
		var gates []string
		if !enabled {
			gates = append(gates, "enabled (tools.elevated.enabled=false)")
		}
		if !allow {
			gates = append(gates, fmt.Sprintf("allowFrom (agents.%s.elevated.allow=false)", agent))
		}
		return "", apitype.Errorf(apitype.CodeElevatedUnavail, "elevated is not available right now (runtime=sandboxed).\nFailing gates: %s\nContext: agent=%s\nFix-it keys: tools.elevated.enabled, agents.%s.elevated.allow, agents.%s.elevated.default",
			strings.Join(gates, ", "), agent, agent, agent)
	}
	if def == "full" {
		return "full", nil
	}
	return "ask", nil
}

// sandboxPatchTarget says where apply_patch applies for an agent whose
// effective host is the sandbox: the host directory bound as the
// sandbox's workspace (apply-patch.md §1). ok is false when sandboxing is
// off for the agent; an unusable backend or an unsafe workspace fails
// closed.
func (e *Engine) sandboxPatchTarget(ctx context.Context, agent string) (PatchTarget, bool, *apitype.Error) {
	sb := e.conf().SandboxFor(agent)
	if !sb.On {
		return PatchTarget{}, false, nil
	}
	backend, err := sandbox.For(ctx, sb)
	if err != nil {
		return PatchTarget{}, false, sandboxUnavailable(err)
	}
	def := e.workspace(ctx, agent)
	if abs, err := filepath.Abs(def); err == nil {
		def = abs
	}
	ws, err := sandbox.Workspace(e.home, def, sb)
	if err != nil {
		return PatchTarget{}, false, sandboxUnavailable(err)
	}
	t := PatchTarget{Workspace: ws, ReadOnly: sb.WorkspaceAccess == "ro"}
	if v := sandbox.NewView(ws, sb, backend.Name()); v.Inside != ws {
		t.ViewRoot = v.Inside
	}
	for _, p := range sb.ProtectPaths {
		t.Protected = append(t.Protected, filepath.Join(ws, p))
	}
	// The workspace's git directories, as the sandbox mounts them.
	gits, err := sandbox.GitProtected(e.home, ws, sb.GitAccess)
	if err != nil {
		return PatchTarget{}, false, sandboxUnavailable(err)
	}
	for _, p := range gits {
		t.Protected = append(t.Protected, filepath.Join(ws, p))
	}
	return t, true, nil
}
