// Package mcpserver exposes an engine's tools over MCP with the official Go
// SDK. It only translates: tool calls go to engine.Call with the raw
// arguments (conch validates them itself, so unknown fields, enum case
// variants and out-of-range numbers get conch's texts), results come back
// as text content plus the details object as structured content, and exec
// events are pushed as notifications/message.
package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
)

// Tool descriptions (exec.md §1, process.md §1).
const (
	execDescription    = "Run a shell command. Long commands continue in the background after yieldMs, or at once with background=true; follow up with the process tool. Use background=true instead of '&' or nohup: processes left behind when a command ends are stopped. Use pty=true for programs that need a terminal."
	processDescription = "Manage exec sessions: list, poll, log, wait, search, screen, write, send-keys, submit, paste, kill, clear, remove."
)

// Options configure a server.
type Options struct {
	// Agent is the agent every call acts for (stdio: --agent).
	Agent string
	// Version is reported as serverInfo.version.
	Version string
	// FullDetails keeps "aggregated" in structured content (mcp.fullDetails).
	FullDetails bool
}

// Server is an MCP server for one engine and one agent.
type Server struct {
	*mcp.Server
	eng *engine.Engine
	opt Options
}

// New returns a server with the exec and process tools.
func New(eng *engine.Engine, opt Options) *Server {
	if opt.Agent == "" {
		opt.Agent = "main"
	}
	s := &Server{eng: eng, opt: opt}
	s.Server = mcp.NewServer(&mcp.Implementation{Name: "conch", Version: opt.Version}, &mcp.ServerOptions{
		HasTools: true,
	})
	if eng.Config().MCP.FullDetails {
		s.opt.FullDetails = true
	}
	out := json.RawMessage(`{"type":"object","required":["status"],"properties":{"status":{"type":"string"}}}`)
	// The tool list is per agent: a denied tool is not listed.
	cfg := eng.Config()
	if !cfg.Denied(opt.Agent, "exec") {
		s.AddTool(&mcp.Tool{Name: "exec", Description: execDescription, InputSchema: json.RawMessage(execSchema), OutputSchema: out}, s.handler("exec"))
	}
	if !cfg.Denied(opt.Agent, "process") {
		s.AddTool(&mcp.Tool{Name: "process", Description: processDescription, InputSchema: json.RawMessage(processSchema), OutputSchema: out}, s.handler("process"))
	}
	return s
}

func (s *Server) handler(tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := s.eng.Call(ctx, s.opt.Agent, tool, req.Params.Arguments)
		return s.toMCP(res), nil
	}
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
// notifications/message (interfaces.md §2.5). It is meant for
// engine.Options.Notify; the agent is fixed per server.
func (s *Server) Notify(agent string, n engine.Notice) {
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
