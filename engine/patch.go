package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/node/port"
	"github.com/conchsh/conch/internal/store/ledger"
	"github.com/conchsh/conch/patch"
)

// PatchTarget is where a patch for a sandboxed agent is applied: the host
// side of the sandbox's workspace bind mount.
type PatchTarget struct {
	// Workspace is the host directory bound as the sandbox's workspace
	// (the private per-scope one with workspaceAccess "none").
	Workspace string
	// ViewRoot is the workspace's path inside the sandbox ("/workspace"):
	// patch paths under it are mapped onto Workspace.
	ViewRoot string
	// ReadOnly is workspaceAccess "ro": the tool fails as unavailable.
	ReadOnly bool
	// Protected are host paths of sandbox.protectPaths.
	Protected []string
}

// NodePatch is the answer of a node to system.patch.apply.
type NodePatch = port.Patch

// patchUnavailable is the text for a host this engine cannot serve.
func patchUnavailable(msg string) apitype.Result {
	return patchError(&apitype.Error{Code: apitype.CodeUnavailable, Message: msg})
}

func patchError(err *apitype.Error) apitype.Result {
	return apitype.Result{Text: err.Message, Details: &apitype.ErrorDetails{Status: "failed", Error: err}}
}

// ApplyPatch runs the apply_patch tool for agent (docs/tools.md): it
// picks where the patch applies from the agent's effective host, applies
// it atomically and records it in the ledger.
func (e *Engine) ApplyPatch(ctx context.Context, agent string, p apitype.PatchParams) apitype.Result {
	return e.withNotices(agent, e.applyPatch(ctx, agent, p))
}

// patchAllowed checks that agent is offered apply_patch: enabled, and
// neither exec nor apply_patch in its tools.deny.
func (e *Engine) patchAllowed(agent string) *apitype.Error {
	cfg := e.conf()
	switch {
	case cfg.Denied(agent, "apply_patch"):
		return apitype.Errorf(apitype.CodeForbidden, "Tool apply_patch is denied for agent %s (tools.deny).", agent)
	case cfg.Denied(agent, "exec"):
		return apitype.Errorf(apitype.CodeForbidden, "Tool apply_patch is denied for agent %s (tools.deny: exec).", agent)
	case !cfg.ApplyPatch(agent).Enabled:
		return apitype.Errorf(apitype.CodeForbidden, "Tool apply_patch is not enabled for agent %s (tools.exec.applyPatch.enabled).", agent)
	}
	return nil
}

func (e *Engine) applyPatch(ctx context.Context, agent string, p apitype.PatchParams) apitype.Result {
	if err := e.patchAllowed(agent); err != nil {
		return patchError(err)
	}
	cfg := e.conf()
	if e.isClosed() {
		return patchUnavailable("conch engine is shutting down.")
	}
	set := cfg.Exec(agent)
	// The effective host without a per-call host.
	host := strings.ToLower(set.Host)
	if d := e.execDefaults(agent); d.Host != "" {
		host = strings.ToLower(d.Host)
	}
	opt := patch.Options{AllowOutside: !cfg.ApplyPatch(agent).WorkspaceOnly}
	switch host {
	case "node":
		if e.opt.PatchNode == nil {
			return patchUnavailable("apply_patch is unavailable: no node is available (no node host is paired with this gateway).")
		}
		np, err := e.opt.PatchNode(ctx, agent, p.Input)
		if err != nil {
			return patchError(err)
		}
		if _, ok := np.Result.Details.(*apitype.PatchDetails); ok {
			e.ledgerPatch(agent, "node", np.NodeID, p.Input, np.Files)
		}
		return np.Result
	case "sandbox", "":
		if res, ok := e.sandboxHostPatch(ctx, agent, cfg.SandboxFor(agent), p.Input); ok {
			return res
		}
		var target PatchTarget
		ok := false
		var err *apitype.Error
		if e.opt.PatchSandbox != nil {
			target, ok, err = e.opt.PatchSandbox(agent)
		} else {
			target, ok, err = e.sandboxPatchTarget(ctx, agent)
		}
		if err != nil {
			return patchError(err)
		}
		if ok {
			if target.ReadOnly {
				return patchUnavailable("apply_patch is unavailable: the sandbox workspace is not writable.")
			}
			opt.Workspace, opt.ViewRoot, opt.Protected = target.Workspace, target.ViewRoot, target.Protected
			return e.applyLocal(ctx, agent, "sandbox", p.Input, opt)
		}
		if host == "sandbox" {
			// An explicit sandbox host fails closed, as exec does.
			return patchUnavailable("apply_patch is unavailable: host=sandbox is configured, but sandbox runtime is unavailable for this session.")
		}
		// The implicit sandbox with sandboxing off: the gateway.
	}
	opt.Workspace = e.workspace(ctx, agent)
	return e.applyLocal(ctx, agent, "gateway", p.Input, opt)
}

// workspace is an agent's workspace on the gateway: agents.<id>.workspace,
// else the proxied --workdir of a stdio client, else agents.json, else
// the engine's cwd (conch mcp --workdir).
func (e *Engine) workspace(ctx context.Context, agent string) string {
	return e.defaultWorkspace(agent, e.conf().Exec(agent), workdirFrom(ctx))
}

// applyLocal applies a patch on this machine's filesystem and records it.
func (e *Engine) applyLocal(ctx context.Context, agent, host, input string, opt patch.Options) apitype.Result {
	res, err := patch.Apply(ctx, input, opt)
	out := PatchResult(res, err)
	if err == nil {
		files := make([]ledger.PatchFile, 0, len(res.Files))
		for _, f := range res.Files {
			files = append(files, ledger.PatchFile{Path: f.Path, Op: f.Op, SHA256Before: f.SHA256Before, SHA256After: f.SHA256After})
		}
		e.ledgerPatch(agent, host, "", input, files)
	}
	return out
}

// ledgerPatch writes the ledger's patch record (the patch's sha256 and each
// file's hashes before and after) when the ledger scope is "all".
func (e *Engine) ledgerPatch(agent, host, nodeID, input string, files []ledger.PatchFile) {
	if files == nil {
		files = []ledger.PatchFile{}
	}
	e.appendLedger(ledger.Record{Type: ledger.TypePatch, Agent: agent, Fields: ledger.Patch{
		Host: host, NodeID: nodeID, PatchSHA256: patch.Digest(input), Files: files,
	}}, false)
}

// ApplyPatchLocal applies a patch to a directory of this machine and
// returns the tool result, without configuration checks or ledger: what a
// node answers to system.patch.apply with its own
// workspace for the agent and its own workspaceOnly.
func ApplyPatchLocal(ctx context.Context, input, workspace string, workspaceOnly bool) apitype.Result {
	res, err := patch.Apply(ctx, input, patch.Options{Workspace: workspace, AllowOutside: !workspaceOnly})
	return PatchResult(res, err)
}

// PatchResult converts the outcome of patch.Apply to a tool result.
func PatchResult(res *patch.Result, err error) apitype.Result {
	if err != nil {
		var pe *patch.Error
		if errors.As(err, &pe) {
			return patchError(&apitype.Error{Code: pe.Code, Message: pe.Message})
		}
		return patchError(&apitype.Error{Code: apitype.CodeIOError, Message: err.Error()})
	}
	return apitype.Result{Text: res.Text, Details: &apitype.PatchDetails{
		Status:  "completed",
		Summary: apitype.PatchSummary{Added: res.Added, Modified: res.Modified, Deleted: res.Deleted},
	}}
}
