// Package mcpserver exposes an engine's tools over MCP with the official Go
// SDK. It only translates: tool calls go to engine.Call with the raw
// arguments (conch validates them itself, so unknown fields, enum case
// variants and out-of-range numbers get conch's texts), results come back
// as text content plus the details object as structured content, and exec
// events are pushed as notifications/message.
package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/base/guard"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/term/visible"
)

// Tool descriptions, as the model sees them.
const (
	execDescription    = "Run a shell command. Long commands continue in the background after yieldMs, or at once with background=true; follow up with the process tool. Use background=true instead of '&' or nohup: processes left behind when a command ends are stopped. Use pty=true for programs that need a terminal."
	processDescription = "Manage exec sessions: list, poll, log, wait, search, screen, write, send-keys, submit, paste, kill, clear, remove."
	patchDescription   = "Apply a patch to files of the workspace: add, delete, update (with context hunks) and move files in one atomic step. Input is the whole patch from '*** Begin Patch' to '*** End Patch'; sections start with '*** Add File: <path>' (lines prefixed with +), '*** Delete File: <path>' or '*** Update File: <path>' (optional '*** Move to: <path>', then hunks: '@@ <line to find>' and lines prefixed with ' ' (context), '-' (remove) or '+' (add); '*** End of File' anchors a hunk at the end). Paths are relative to the workspace."
)

// instructions is the server's initialize instructions: how the tools
// are meant to be used together. Short: it is sent to every session.
const instructions = `conch runs shell commands (exec) and manages the sessions they leave running (process).
- Servers, watchers, long builds: exec with background=true, keep the sessionId.
- Then process wait (until exit, regex, port, http, file or idle) instead of sleep loops or repeated polls; its result carries the output new since your last read.
- Read more with poll (new output), log or search. Results carry a cursor: pass it as since to read only what came after.
- Units: exec timeout is seconds; process timeout, yieldMs, idleMs and delayMs are milliseconds.
- Stop what you started: process kill, or remove.`

// Tool annotations (hints for clients; MCP defaults: destructive and
// open world). exec runs arbitrary commands. process mixes reads (list,
// poll, log, wait, search, screen) with actions that stop processes and
// delete their output (kill, remove, clear) or type into them (write,
// send-keys), and wait probes URLs: annotations are per tool, so it
// declares the strongest of its actions. apply_patch overwrites and
// deletes workspace files and touches nothing else.
var annotations = map[string]*mcp.ToolAnnotations{
	"exec":        {Title: "Run a shell command", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	"process":     {Title: "Manage running commands", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	"apply_patch": {Title: "Apply a patch to workspace files", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
}

func ptr[T any](v T) *T { return &v }

// Options configure a server.
type Options struct {
	// Agent is the agent every call acts for (stdio: --agent).
	Agent string
	// Version is reported as serverInfo.version.
	Version string
	// FullDetails keeps "aggregated" in structured content (mcp.fullDetails).
	FullDetails bool
	// Logger receives recovered handler panics (nil: slog's default).
	Logger *slog.Logger
}

// Server is an MCP server for one engine and one agent.
type Server struct {
	*mcp.Server
	eng Engine
	opt Options
	key [32]byte // signs the request state of multi round-trip calls

	stopped  chan struct{} // closed by Stop
	stopOnce sync.Once
}

// Stop makes the server refuse new tool calls with "conch engine is
// shutting down." (code unavailable) and end its waits on the client:
// for a stdio server whose engine it does not own (a proxy). Calls in
// flight still get their answers.
func (s *Server) Stop() { s.stopOnce.Do(func() { close(s.stopped) }) }

// New returns a server with the exec and process tools, and apply_patch
// when the agent is offered it.
// Engine is what the server needs of an engine: *engine.Engine, or a
// proxy to the engine that holds the home (conch mcp next to conch serve).
type Engine interface {
	Call(ctx context.Context, agent, tool string, args json.RawMessage) apitype.Result
	Config() *config.Config
	Pending(agent, sessionID string) bool
	DecideApproval(idOrSlug, decision, decidedBy string) error
	AwaitApproved(ctx context.Context, agent, sessionID string, window time.Duration) apitype.Result
	// Stopping is closed when the engine stops (engine.Engine.Stop); nil
	// when it never does. A call waiting on its client (an elicitation)
	// stops waiting then and answers with what it has.
	Stopping() <-chan struct{}
}

var _ Engine = (*engine.Engine)(nil)

func New(eng Engine, opt Options) *Server {
	if opt.Agent == "" {
		opt.Agent = "main"
	}
	s := &Server{eng: eng, opt: opt, stopped: make(chan struct{})}
	rand.Read(s.key[:])
	s.Server = mcp.NewServer(&mcp.Implementation{Name: "conch", Version: opt.Version}, &mcp.ServerOptions{
		HasTools:     true,
		Instructions: instructions,
	})
	// Any other method (initialize, tools/list, …): a panic answers that
	// request with a JSON-RPC error instead of ending the process.
	s.Server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				if v := recover(); v != nil {
					res, err = nil, guard.Recovered("mcp", s.opt.Logger, v)
				}
			}()
			return next(ctx, method, req)
		}
	})
	if eng.Config().MCP.FullDetails {
		s.opt.FullDetails = true
	}
	// The tool list is per agent: a denied tool is not listed.
	cfg := eng.Config()
	for _, t := range []struct {
		name, desc, schema string
		offered            bool
	}{
		{"exec", execDescription, execSchema, !cfg.Denied(opt.Agent, "exec")},
		{"process", processDescription, processSchema, !cfg.Denied(opt.Agent, "process")},
		{"apply_patch", patchDescription, patchSchema, cfg.ApplyPatchOffered(opt.Agent)},
	} {
		if t.offered {
			s.AddTool(&mcp.Tool{Name: t.name, Description: t.desc, InputSchema: json.RawMessage(t.schema),
				OutputSchema: outputSchema(t.name), Annotations: annotations[t.name]}, s.handler(t.name))
		}
	}
	return s
}

func (s *Server) handler(tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (out *mcp.CallToolResult, err error) {
		// A panic below answers this call with an internal error and
		// leaves the server (and every other agent's calls) running.
		defer func() {
			if v := recover(); v != nil {
				p := guard.Recovered("mcp", s.opt.Logger, v)
				e := apitype.Errorf(apitype.CodeInternal, "%s (logged; the server keeps running)", p.Error())
				out, err = s.toMCP(apitype.Result{Text: e.Message, Details: &apitype.ErrorDetails{Status: "error", Error: e}}), nil
			}
		}()
		select {
		case <-s.stopped:
			e := apitype.Errorf(apitype.CodeUnavailable, "conch engine is shutting down.")
			return s.toMCP(apitype.Result{Text: e.Message, Details: &apitype.ErrorDetails{Status: "error", Error: e}}), nil
		default:
		}
		if tool == "exec" && len(req.Params.InputResponses) > 0 {
			// The retry of a multi round-trip call (SEP-2322): the human's
			// answer to our approval question; the command is not run
			// again.
			if res, ok := s.answered(ctx, req); ok {
				return s.toMCP(res), nil
			}
		}
		res := s.eng.Call(ctx, s.opt.Agent, tool, req.Params.Arguments)
		if d, ok := res.Details.(*apitype.ApprovalDetails); ok && tool == "exec" {
			if r := s.askInline(req, d); r != nil {
				return r, nil
			}
			res = s.elicit(ctx, req, d, res)
		}
		return s.toMCP(res), nil
	}
}

// approvalQuestion is the elicitation that asks the human behind an MCP
// client to decide a pending approval.
func (s *Server) approvalQuestion(d *apitype.ApprovalDetails) *mcp.ElicitParams {
	left := time.Until(time.UnixMilli(d.ExpiresAtMs))
	host := d.Host
	if d.NodeName != "" {
		host += " node " + d.NodeName
	}
	// A client shows this to the person who decides: every field an agent
	// or a node chose stays on its line with its hidden characters
	// escaped, so the command read is the command that runs.
	l := visible.Line
	msg := fmt.Sprintf("Approve command for agent %s on %s?\nCommand: %s\nDirectory: %s\nReason: %s\nExpires in %ds (id %s)",
		l(s.opt.Agent), l(host), l(d.Command), l(d.Cwd), l(d.Reason), int(left.Seconds()), l(d.ApprovalSlug))
	schema := map[string]any{
		"type": "object", "required": []string{"decision"},
		"properties": map[string]any{"decision": map[string]any{
			"type": "string", "enum": []string{"allow-once", "allow-always", "deny"},
			"enumNames": []string{"Allow once", "Always allow", "Deny"},
		}},
	}
	return &mcp.ElicitParams{Message: msg, RequestedSchema: schema}
}

// canElicit reports whether the client takes elicitations and
// approvals.elicitation is on.
func (s *Server) canElicit(req *mcp.CallToolRequest) (bool, *mcp.InitializeParams) {
	if !s.eng.Config().Elicitation(s.opt.Agent) {
		return false, nil
	}
	ip := req.Session.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false, nil
	}
	return true, ip
}

// askInline returns an input-required result carrying the approval
// question, for clients on protocol versions that forbid server requests
// during a call (2026-07-28 and later, SEP-2322); nil otherwise.
func (s *Server) askInline(req *mcp.CallToolRequest, d *apitype.ApprovalDetails) *mcp.CallToolResult {
	ok, ip := s.canElicit(req)
	if !ok || ip.ProtocolVersion < "2026-07-28" {
		return nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{"approval": s.approvalQuestion(d)},
		RequestState:  s.sign(s.opt.Agent + "|" + d.ApprovalID + "|" + d.SessionID),
	}
}

// answered handles the retry that carries the answer to askInline.
func (s *Server) answered(ctx context.Context, req *mcp.CallToolRequest) (apitype.Result, bool) {
	state, ok := s.verify(req.Params.RequestState)
	if !ok {
		return apitype.Result{}, false
	}
	parts := strings.SplitN(state, "|", 3)
	if len(parts) != 3 || parts[0] != s.opt.Agent {
		return apitype.Result{}, false
	}
	approvalID, sessionID := parts[1], parts[2]
	er, _ := req.Params.InputResponses["approval"].(*mcp.ElicitResult)
	by := "mcp:" + s.opt.Agent + ":" + clientName(req)
	switch {
	case er == nil || er.Action == "cancel":
		if s.eng.Pending(s.opt.Agent, sessionID) {
			return apitype.Result{
				Text:    fmt.Sprintf("Approval required (id %s). Approve to run; updates will arrive after completion.\nSession: %s (poll it with process for the outcome)", approvalID[:8], sessionID),
				Details: &apitype.ApprovalDetails{Status: "approval-pending", ApprovalID: approvalID, ApprovalSlug: approvalID[:8], SessionID: sessionID},
			}, true
		}
	case er.Action == "decline":
		s.eng.DecideApproval(approvalID, "deny", by)
	default:
		if decision, _ := er.Content["decision"].(string); decision != "" {
			s.eng.DecideApproval(approvalID, decision, by)
		}
	}
	return s.eng.AwaitApproved(ctx, s.opt.Agent, sessionID, s.eng.Config().Exec(s.opt.Agent).Yield), true
}

func clientName(req *mcp.CallToolRequest) string {
	if ip := req.Session.InitializeParams(); ip != nil && ip.ClientInfo != nil && ip.ClientInfo.Name != "" {
		return ip.ClientInfo.Name
	}
	return "client"
}

// sign and verify protect the request state the client echoes back.
func (s *Server) sign(v string) string {
	m := hmac.New(sha256.New, s.key[:])
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString([]byte(v)) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *Server) verify(tok string) (string, bool) {
	p, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return "", false
	}
	v, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return "", false
	}
	want := s.sign(string(v))
	if !hmac.Equal([]byte(want), []byte(p+"."+sig)) {
		return "", false
	}
	return string(v), true
}

// elicit asks the human at the MCP client to decide an approval
// when the client can and approvals.elicitation is
// on. Without an answer (cancel, error, decided elsewhere first) the
// approval-pending result stands and the approval stays open.
func (s *Server) elicit(ctx context.Context, req *mcp.CallToolRequest, d *apitype.ApprovalDetails, pending apitype.Result) apitype.Result {
	if ok, _ := s.canElicit(req); !ok {
		return pending
	}
	client := clientName(req)
	left := time.Until(time.UnixMilli(d.ExpiresAtMs))
	ectx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	// Decided elsewhere (CLI, API) first: stop asking.
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ectx.Done():
				return
			case <-s.eng.Stopping():
				// conch stops: the approval stays open (it
				// survives the restart); the call answers pending.
				cancel()
				return
			case <-s.stopped:
				cancel()
				return
			case <-t.C:
				if !s.eng.Pending(s.opt.Agent, d.SessionID) {
					cancel()
					return
				}
			}
		}
	}()
	er, err := req.Session.Elicit(ectx, s.approvalQuestion(d))
	by := "mcp:" + s.opt.Agent + ":" + client
	switch {
	case err != nil || er == nil || er.Action == "cancel":
		if !s.eng.Pending(s.opt.Agent, d.SessionID) {
			return s.eng.AwaitApproved(ctx, s.opt.Agent, d.SessionID, s.eng.Config().Exec(s.opt.Agent).Yield)
		}
		return pending
	case er.Action == "decline":
		s.eng.DecideApproval(d.ApprovalID, "deny", by)
	default:
		decision, _ := er.Content["decision"].(string)
		if decision == "" {
			return pending
		}
		if err := s.eng.DecideApproval(d.ApprovalID, decision, by); err != nil && s.eng.Pending(s.opt.Agent, d.SessionID) {
			return pending
		}
	}
	return s.eng.AwaitApproved(ctx, s.opt.Agent, d.SessionID, s.eng.Config().Exec(s.opt.Agent).Yield)
}

// toMCP converts a tool result: text content, details as structured
// content, isError exactly when the details carry an error object.
func (s *Server) toMCP(res apitype.Result) *mcp.CallToolResult {
	if d, ok := res.Details.(*apitype.ExecDetails); ok && !s.opt.FullDetails {
		c := *d
		c.Aggregated = nil
		res.Details = &c
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: res.Text}},
		StructuredContent: res.Details,
		IsError:           res.IsError(),
	}
}

// Notify sends an exec event to every live MCP session as
// notifications/message. It is meant for
// engine.Options.Notify; the agent is fixed per server.
func (s *Server) Notify(agent string, n apitype.Notice) {
	if agent != s.opt.Agent {
		return
	}
	level := mcp.LoggingLevel("info")
	if n.Kind == "failed" {
		level = "warning"
	}
	for ss := range s.Sessions() {
		ss.Log(context.Background(), &mcp.LoggingMessageParams{Logger: "conch.exec", Level: level, Data: n})
	}
}
