package apitype

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
)

// Node protocol: JSON text frames on the WebSocket between
// a gateway and a node host.

// Frame is one request, response or event.
type Frame struct {
	Type    string          `json:"type"` // req | res | event
	ID      string          `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	OK      bool            `json:"ok,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *Error          `json:"error,omitempty"`
	Event   string          `json:"event,omitempty"`
}

// Node error codes.
const (
	NodeInvalidRequest = "INVALID_REQUEST"
	NodeRunDenied      = "SYSTEM_RUN_DENIED"
	NodeRunDisabled    = "SYSTEM_RUN_DISABLED"
	NodeUnavailable    = "UNAVAILABLE"
	// NodeSessionIDInUse: system.run named a session id the node already
	// keeps; the gateway retries once with a fresh id. Its message keeps
	// the INVALID_REQUEST prefix it had before it had a code of its own.
	NodeSessionIDInUse = "SESSION_ID_IN_USE"
	// NodeApprovalsConflict: system.execApprovals.set named a base hash
	// the node's file no longer has (reload and retry); its message keeps
	// the INVALID_REQUEST prefix too.
	NodeApprovalsConflict = "APPROVALS_CONFLICT"
	// NodeUnauthorized: the gateway refused a node's hello (bad
	// signature, unknown or revoked key, a pod token that did not verify).
	NodeUnauthorized = "UNAUTHORIZED"
)

// NodeCodes lists every error code of node frames (a test keeps it equal
// to the constants above).
func NodeCodes() []string {
	return []string{NodeApprovalsConflict, NodeInvalidRequest, NodeRunDenied, NodeRunDisabled,
		NodeSessionIDInUse, NodeUnauthorized, NodeUnavailable}
}

// NodeHello is the node's node.hello request.
type NodeHello struct {
	NodeID    string   `json:"nodeId"`
	PublicKey string   `json:"publicKey"` // base64 of the Ed25519 public key
	Signature string   `json:"signature"` // base64 of Ed25519("conch-node-hello\n" + nonce)
	Name      string   `json:"name"`
	Platform  string   `json:"platform"`
	Arch      string   `json:"arch"`
	Version   string   `json:"version"`
	Caps      []string `json:"caps"`
}

// NodeHelloReply answers node.hello.
type NodeHelloReply struct {
	Status    string `json:"status"` // paired | pending
	RequestID string `json:"requestId,omitempty"`
	NodeID    string `json:"nodeId"`
}

// NodePrepareParams are the params of system.run.prepare.
type NodePrepareParams struct {
	Command    []string `json:"command"`
	RawCommand string   `json:"rawCommand"`
	Cwd        string   `json:"cwd,omitempty"`
	AgentID    string   `json:"agentId"`
	EnvHash    string   `json:"envHash"`
	Tool       struct {
		Security string `json:"security,omitempty"`
		Ask      string `json:"ask,omitempty"`
	} `json:"tool"`
}

// NodeVerdict is the node's own policy verdict on a prepared plan.
type NodeVerdict struct {
	RequiresApproval bool     `json:"requiresApproval"`
	Reason           string   `json:"reason,omitempty"`
	Segments         []string `json:"segments"`
}

// NodePlan is a run plan.
type NodePlan struct {
	PlanID      string        `json:"planId"`
	Argv        []string      `json:"argv"`
	RawCommand  string        `json:"rawCommand"`
	Cwd         string        `json:"cwd"`
	CwdIdentity [2]uint64     `json:"cwdIdentity"`
	Exes        []NodePlanExe `json:"exes"`
	Script      *NodePlanExe  `json:"script,omitempty"`
	EnvHash     string        `json:"envHash"`
	AgentID     string        `json:"agentId"`
	ExpiresAtMs int64         `json:"expiresAtMs" range:"0,9007199254740992,int,unit=ms"`
}

// NodePlanExe is a pinned file: absolute path and sha256.
type NodePlanExe struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// NodePrepareReply is the payload of system.run.prepare.
type NodePrepareReply struct {
	PlanID   string      `json:"planId"`
	CmdText  string      `json:"cmdText"`
	Plan     NodePlan    `json:"plan"`
	PlanHash string      `json:"planHash"`
	Verdict  NodeVerdict `json:"verdict"`
}

// NodeRunParams are the params of system.run.
type NodeRunParams struct {
	PlanID           string            `json:"planId"`
	Command          []string          `json:"command"`
	RawCommand       string            `json:"rawCommand"`
	Cwd              string            `json:"cwd"`
	Env              map[string]string `json:"env,omitempty"`
	TimeoutMs        int64             `json:"timeoutMs" range:"0,31536000000,int,unit=ms"`
	AgentID          string            `json:"agentId"`
	RunID            string            `json:"runId"`
	SessionID        string            `json:"sessionId"`
	Approved         bool              `json:"approved"`
	ApprovalDecision string            `json:"approvalDecision,omitempty"`
	Stream           bool              `json:"stream"`
	PTY              bool              `json:"pty"`
	Cols             int               `json:"cols,omitempty" range:"0,65535,int"`
	Rows             int               `json:"rows,omitempty" range:"0,65535,int"`
	// Stdin is open, closed or pty, as the gateway planned it: a PTY run
	// reads the terminal, a background run an open pipe, others EOF.
	Stdin string `json:"stdin,omitempty"`
	// Since is where the output stream starts (0 for a new run).
	Since int64 `json:"since,omitempty" range:"0,9007199254740992,int,unit=bytes"`
}

// NodeRunReply is the payload of a streamed system.run.
type NodeRunReply struct {
	SessionID string `json:"sessionId"`
	PID       int    `json:"pid" range:"0,4194304,int"`
	Cwd       string `json:"cwd"`
}

// NodeOutput is the payload of exec.output.
type NodeOutput struct {
	RunID     string `json:"runId"`
	SessionID string `json:"sessionId"`
	Stream    string `json:"stream"`
	Cursor    int64  `json:"cursor" range:"0,9007199254740992,int,unit=bytes"` // position just after Data
	Data      []byte `json:"data"`                                             // base64 in JSON
}

// NodeFinished is the payload of exec.finished. Exit is the node's
// exit.json record (so the gateway's mirror has the full end state).
type NodeFinished struct {
	RunID     string          `json:"runId"`
	SessionID string          `json:"sessionId,omitempty"`
	Host      string          `json:"host"`
	Command   string          `json:"command"`
	ExitCode  *int            `json:"exitCode" range:"-1,255,int"`
	TimedOut  bool            `json:"timedOut"`
	Success   bool            `json:"success"`
	State     string          `json:"state"`
	Signal    *string         `json:"signal"`
	KilledBy  *string         `json:"killedBy"`
	Output    string          `json:"output"`
	Cursor    int64           `json:"cursor" range:"0,9007199254740992,int,unit=bytes"`
	Exit      json.RawMessage `json:"exit,omitempty"`
}

// NodeSessionParams are the params of system.session.* (a request to the
// session's supervisor over its control socket, forwarded to the node) and
// system.session.read.
type NodeSessionParams struct {
	SessionID string          `json:"sessionId"`
	Request   json.RawMessage `json:"request,omitempty"`
	Since     int64           `json:"since,omitempty" range:"0,9007199254740992,int,unit=bytes"`
}

// NodeApprovalsFile is the payload of system.execApprovals.get.
type NodeApprovalsFile struct {
	Path   string          `json:"path"`
	Exists bool            `json:"exists"`
	Hash   string          `json:"hash"`
	File   json.RawMessage `json:"file"`
}

// NodeApprovalsSet are the params of system.execApprovals.set.
type NodeApprovalsSet struct {
	File     json.RawMessage `json:"file"`
	BaseHash string          `json:"baseHash"`
}

// NodeIDOf is the node id of an Ed25519 public key: lowercase hex of the
// first 12 bytes of its sha256.
func NodeIDOf(pub []byte) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:12])
}

// NodeHelloMessage is what a node signs to answer a challenge.
func NodeHelloMessage(nonce string) []byte { return []byte("conch-node-hello\n" + nonce) }

// NormalizeNodeName lower-cases the ASCII letters of a node name, turns
// runs of anything else than [a-z0-9] (spaces, punctuation, every
// non-ASCII character, so no look-alike letter survives) into "-" and
// trims them.
func NormalizeNodeName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}

// EncodeNodeOutput is the binary form of an exec.output event: a 4-byte
// big-endian header length, the header (the event's JSON without data)
// and the raw data. It spares the base64 and JSON scanning of the data,
// which bound a text frame's throughput (docs/nodes.md).
func EncodeNodeOutput(o NodeOutput) []byte {
	data := o.Data
	o.Data = nil
	h, _ := json.Marshal(o)
	b := make([]byte, 4+len(h)+len(data))
	binary.BigEndian.PutUint32(b, uint32(len(h)))
	copy(b[4:], h)
	copy(b[4+len(h):], data)
	return b
}

// DecodeNodeOutput parses EncodeNodeOutput's form. Data aliases b.
func DecodeNodeOutput(b []byte) (NodeOutput, error) {
	var o NodeOutput
	if len(b) < 4 {
		return o, errors.New("short binary frame")
	}
	n := int(binary.BigEndian.Uint32(b))
	if n > len(b)-4 {
		return o, errors.New("bad binary frame header length")
	}
	if err := json.Unmarshal(b[4:4+n], &o); err != nil {
		return o, err
	}
	o.Data = b[4+n:]
	return o, nil
}
