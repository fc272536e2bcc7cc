package engine

import (
	"context"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host"
)

// sandboxHostPatch applies a patch through the host that runs the agent's
// sandboxes when that host applies patches itself (a pod, through its
// node); ok is false when it does not, and the patch applies here.
func (e *Engine) sandboxHostPatch(ctx context.Context, agent string, sb config.SandboxSettings, input string) (res apitype.Result, ok bool) {
	if !sb.On {
		return apitype.Result{}, false
	}
	h, found := e.hosts.Lookup(host.SandboxHost(sb.Backend))
	pp, patches := h.(host.Patcher)
	if !found || !patches {
		return apitype.Result{}, false
	}
	np, err, ok := pp.Patch(ctx, agent, sb, input)
	switch {
	case !ok:
		return apitype.Result{}, false
	case err != nil:
		return patchError(err), true
	}
	if _, ok := np.Result.Details.(*apitype.PatchDetails); ok {
		e.ledgerPatch(agent, "sandbox", np.NodeID, input, np.Files)
	}
	return np.Result, true
}
