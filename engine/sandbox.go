package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/session/supervisor"
)

// sandboxUnavailable is the error of a sandbox run that cannot have its
// sandbox: it fails closed and never falls back to the gateway.
var sandboxUnavailable = host.SandboxUnavailable

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

// elevatedLevel resolves elevated mode (the gates tools.elevated.enabled
// and agents.<id>.elevated.allow, the default level) for an agent whose sandboxing is
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
// sandbox's workspace. ok is false when sandboxing is
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
