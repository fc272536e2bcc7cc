package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/sandbox"
	"github.com/conchsh/conch/internal/supervisor"
)

// sandboxUnavailable is the fail-closed error of hosts.md §1 (text of
// exec.md §8.6); the cause, when known, is appended on a last line.
func sandboxUnavailable(cause error) *apitype.Error {
	msg := "exec host=sandbox is configured, but sandbox runtime is unavailable for this session.\nEnable sandboxing (sandbox.mode) with an available backend (bwrap, docker or landlock), or use host=gateway with approvals."
	if cause != nil {
		msg += "\n(" + cause.Error() + ")"
	}
	return apitype.Errorf(apitype.CodeSandboxUnavail, "%s", msg)
}

// planSandbox fills in the workdir, environment and argv of a sandboxed
// run (exec.md §4.3, §5.1–§5.3; hosts.md §3).
func (e *Engine) planSandbox(pl *plan, p apitype.ExecParams, sb config.SandboxSettings, backend sandbox.Backend, workspace string) *apitype.Error {
	set := pl.set
	def := set.Workspace
	if def == "" {
		def = workspace
	}
	if def == "" && e.opt.Workspace != nil {
		def = e.opt.Workspace(pl.agent)
	}
	if def == "" {
		def = e.cwd
	}
	if abs, err := filepath.Abs(def); err == nil {
		def = abs
	}
	if !isDir(def) && sb.WorkspaceAccess != "none" {
		return sandboxUnavailable(fmt.Errorf("the workspace %s is not a directory", def))
	}
	ws, err := sandbox.Workspace(e.home, def, sb)
	if err != nil {
		return sandboxUnavailable(err)
	}
	view := sandbox.NewView(ws, sb, backend.Name())
	pl.cwd = ws
	if w := p.Workdir; w != "" {
		var host string
		switch {
		case filepath.IsAbs(w):
			if h, ok := view.MapOut(w); ok {
				host = h
			} else if _, ok := view.MapIn(w); ok {
				host = filepath.Clean(w)
			}
		case !strings.HasPrefix(w, "~"):
			host = filepath.Join(ws, w)
		}
		if _, inside := view.MapIn(host); host != "" && inside && isDir(host) {
			pl.cwd = host
		} else {
			pl.warnings = append(pl.warnings, fmt.Sprintf("Warning: workdir %q is unavailable; using %q.", p.Workdir, view.Inside))
		}
	}

	// Environment (exec.md §5.2 sandbox): PATH, HOME, LANG, the
	// non-interactive defaults, sandbox.env, the request env as given;
	// PATH additions travel in CONCH_PREPEND_PATH (§5.3).
	req := map[string]string{}
	var prepend []string
	prepend = append(prepend, set.PathPrepend...)
	for k, v := range p.Env {
		pl.envKeys = append(pl.envKeys, k)
		if strings.EqualFold(k, "PATH") {
			prepend = append(prepend, v)
			continue
		}
		req[k] = v
	}
	sort.Strings(pl.envKeys)
	pl.envHash = envHash(p.Env)
	env := sandbox.Env(sandbox.InsideHome, os.Getenv("PATH"), set.NonInteractiveEnv, sb.Env, req)
	command := p.Command
	if pp := prependPath(prepend, ""); pp != "" {
		env["CONCH_PREPEND_PATH"] = pp
		command = `export PATH="${CONCH_PREPEND_PATH}:$PATH"; unset CONCH_PREPEND_PATH; ` + command
	}
	env["CONCH_SHELL"] = "exec"
	env["OPENCLAW_SHELL"] = "exec"
	if pl.pty {
		if t := os.Getenv("TERM"); t != "" {
			env["TERM"] = t
		} else {
			env["TERM"] = "xterm-256color"
		}
	}
	var envList []string
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)

	exe, err := os.Executable()
	if err != nil {
		return sandboxUnavailable(fmt.Errorf("locate the conch executable: %v", err))
	}
	run := &sandbox.Run{Home: e.home, Exe: exe, Settings: sb, Workspace: ws, Cwd: pl.cwd, Command: command, Env: envList, PTY: pl.pty}
	if err := backend.Prepare(context.Background(), run); err != nil {
		return sandboxUnavailable(err)
	}
	argv, cmdEnv, err := backend.Command(run)
	if err != nil {
		return sandboxUnavailable(err)
	}
	pl.argv, pl.env = argv, cmdEnv
	layers := backend.Layers(run)
	pl.sandbox = &supervisor.SandboxSpec{
		Backend: backend.Name(), Scope: sb.Scope, Layers: layers,
		MemoryBytes: sb.MemoryBytes, Pids: sb.Pids, CPUs: sb.CPUs,
		BlockFD:    backend.Name() != "docker",
		CttyInside: backend.Name() == "bwrap" && pl.pty,
		Files:      run.Files,
	}
	if d, ok := backend.(*sandbox.Docker); ok {
		// Docker enforces the limits on the container; its processes are
		// outside the session cgroup, so the kill runs inside too.
		pl.sandbox.MemoryBytes, pl.sandbox.Pids, pl.sandbox.CPUs = 0, 0, 0
		pl.sandbox.KillArgv = d.KillArgv(run)
	}
	inCwd, _ := view.MapIn(pl.cwd)
	pl.sbInfo = &apitype.SandboxInfo{Backend: backend.Name(), Scope: sb.Scope, Layers: layers,
		Workspace: view.Inside, HostWorkspace: ws, Cwd: inCwd}
	return nil
}

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
		if sb.On && sb.Backend == "kubernetes" {
			row.Backend, row.Layers = "kubernetes", []string{"pod"}
		} else if sb.On {
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
