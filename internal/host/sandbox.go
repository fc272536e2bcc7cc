package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/host/sandbox"
	_ "github.com/conchsh/conch/internal/host/sandbox/backends" // sandbox.For knows every backend
	"github.com/conchsh/conch/internal/host/sandbox/docker"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

func init() { Register("sandbox", func(d Deps) Host { return &sandboxHost{d: d} }) }

// sandboxHost runs commands in a sandbox on the gateway (bwrap, landlock,
// docker or seatbelt, from internal/host/sandbox) under a local supervisor. No policy
// gate applies: the sandbox's walls are the protection.
type sandboxHost struct{ d Deps }

func (h *sandboxHost) Name() string { return "sandbox" }

// Plan fills in the workdir, environment and argv of a sandboxed run. It
// prepares the backend (a docker container may be created) under ctx.
func (h *sandboxHost) Plan(ctx context.Context, req Request, pl *Plan) *apitype.Error {
	p, sb, backend := req.Params, req.Sandbox, req.Backend
	pl.Gate = GateNone
	if backend == nil {
		return SandboxUnavailable(nil)
	}
	def := req.Workspace
	if abs, err := filepath.Abs(def); err == nil {
		def = abs
	}
	if !isDir(def) && sb.WorkspaceAccess != "none" {
		return SandboxUnavailable(fmt.Errorf("the workspace %s is not a directory", def))
	}
	ws, err := sandbox.Workspace(h.d.Home, def, sb)
	if err != nil {
		return SandboxUnavailable(err)
	}
	if w := sandbox.PathWarning(ws); w != "" {
		pl.Warnings = append(pl.Warnings, w)
	}
	view := sandbox.NewView(ws, sb, backend.Name())
	pl.Cwd = ws
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
			pl.Cwd = host
		} else {
			pl.Warnings = append(pl.Warnings, fmt.Sprintf("Warning: workdir %q is unavailable; using %q.", p.Workdir, view.Inside))
		}
	}

	// Environment: PATH, HOME, LANG, the non-interactive defaults,
	// sandbox.env, the request env as given; PATH additions travel in
	// CONCH_PREPEND_PATH, applied inside (the sandbox's PATH is its own).
	req2 := map[string]string{}
	prepend := append([]string(nil), pl.Set.PathPrepend...)
	for k, v := range p.Env {
		if strings.EqualFold(k, "PATH") {
			prepend = append(prepend, v)
			continue
		}
		req2[k] = v
	}
	pl.EnvKeys = SortedKeys(p.Env)
	pl.EnvHash = EnvHash(p.Env)
	path := os.Getenv("PATH")
	if path == "" {
		path = sandbox.DefaultPath
	}
	spec := EnvSpec{
		Base:   map[string]string{"PATH": path, "HOME": sandbox.InsideHome, "LANG": "C.UTF-8"},
		Layers: []map[string]string{pl.Set.NonInteractiveEnv, sb.Env, req2},
		PTY:    pl.PTY,
	}
	command := p.Command
	if pp := PrependPath(prepend, ""); pp != "" {
		spec.Layers = append(spec.Layers, map[string]string{"CONCH_PREPEND_PATH": pp})
		command = `export PATH="${CONCH_PREPEND_PATH}:$PATH"; unset CONCH_PREPEND_PATH; ` + command
	}
	envList := spec.Build()

	exe := ""
	if h.d.InitExe != nil {
		exe = h.d.InitExe()
	}
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return SandboxUnavailable(fmt.Errorf("locate the conch executable: %v", err))
		}
	}
	run := &sandbox.Run{Home: h.d.Home, Exe: exe, Settings: sb, Workspace: ws, HostWorkspace: def, Cwd: pl.Cwd, Command: command, Env: envList, PTY: pl.PTY}
	if err := backend.Prepare(ctx, run); err != nil {
		return SandboxUnavailable(err)
	}
	argv, cmdEnv, err := backend.Command(run)
	if err != nil {
		return SandboxUnavailable(err)
	}
	pl.Argv, pl.Env = argv, cmdEnv
	if len(run.Protected) > 0 {
		// docker mounts the workspace whole: no Protected paths.
		pl.Guard = sandbox.NewGuardFor(ws, run.Protected, run.ProtectedReadOnly)
	}
	layers := backend.Layers(run)
	pl.Sandbox = &proto.SandboxSpec{
		Backend: backend.Name(), Scope: sb.Scope, Layers: layers,
		MemoryBytes: sb.MemoryBytes, Pids: sb.Pids, CPUs: sb.CPUs,
		BlockFD:    run.BlockFD,
		CttyInside: run.CttyInside,
		Files:      run.Files,
	}
	if d, ok := backend.(*docker.Docker); ok {
		// Docker enforces the limits on the container; its processes are
		// outside the session cgroup, so the kill runs inside too.
		pl.Sandbox.MemoryBytes, pl.Sandbox.Pids, pl.Sandbox.CPUs = 0, 0, 0
		pl.Sandbox.KillArgv = d.KillArgv(run)
	}
	inCwd, _ := view.MapIn(pl.Cwd)
	pl.SbInfo = &apitype.SandboxInfo{Backend: backend.Name(), Scope: sb.Scope, Layers: layers,
		Workspace: view.Inside, HostWorkspace: ws, Cwd: inCwd}
	return nil
}

func (h *sandboxHost) Start(ctx context.Context, pl *Plan, spec proto.Spec, run Run) (*proto.Handle, error) {
	return h.d.Launch(ctx, spec)
}
