// Package port holds the types the engine and the node packages share:
// a selected node (Ref), a node's answer to apply_patch (Patch) and the
// gateway's node hub as the engine uses it (Hub). It sits below both, so
// that the node packages (internal/node/hub, internal/node/agent) never import
// the engine and the engine never imports them: cmd/conch wires one into
// the other.
package port

import (
	"context"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/store/ledger"
)

// Ref names a selected node.
type Ref struct {
	ID   string
	Name string
	Caps []string
}

// Patch is the answer of a node to system.patch.apply.
type Patch struct {
	// NodeID and NodeName identify the node that applied the patch.
	NodeID, NodeName string
	// Result is the node's {text, details}: details decode to
	// *apitype.PatchDetails or *apitype.ErrorDetails.
	Result apitype.Result
	// Files are the changes the node reports, for the ledger (optional).
	Files []ledger.PatchFile
}

// Hub is the gateway's node hub as the engine uses it: the engine plans a
// host=node run, and the hub reaches the node.
type Hub interface {
	// Select picks a paired node for query ("" = the only connected one;
	// several connected is an error).
	Select(query string) (Ref, *apitype.Error)
	// Prepare sends system.run.prepare to the node.
	Prepare(ctx context.Context, nodeID string, p apitype.NodePrepareParams) (apitype.NodePrepareReply, *apitype.Error)
	// Start mirrors spec.ID into the local session directory and sends
	// system.run; the handle behaves like a local supervisor's.
	Start(nodeID string, spec proto.Spec, run apitype.NodeRunParams) (*proto.Handle, error)
	// Removed records that session id was removed before its node
	// reported the end: it is never resumed after a restart, and its
	// kill reaches the node when it is back.
	Removed(sessionID string)
}
