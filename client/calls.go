package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/conchsh/conch/apitype"
)

// Exec runs the exec tool (POST /v1/exec). params is anything that
// marshals to the exec parameters object: an apitype.ExecParams, a
// map[string]any or a json.RawMessage. The answer is the tool result:
// completed, failed, running (follow it with Stream or Process) or
// approval-pending. A result with status "error" comes with an *Error.
func (c *Client) Exec(ctx context.Context, params any) (Result, error) {
	return c.tool(ctx, "POST", "/v1/exec", nil, params)
}

// Process runs any action of the process tool (POST /v1/process). params
// marshals to the process parameters object (apitype.ProcessParams, a
// map[string]any or a json.RawMessage). Failures (details with an error
// object) come with an *Error.
func (c *Client) Process(ctx context.Context, params any) (Result, error) {
	return c.tool(ctx, "POST", "/v1/process", nil, params)
}

// ApplyPatch runs the apply_patch tool (POST /v1/apply_patch) with a
// patch in the "*** Begin Patch" format. Decode the details of a success
// into an apitype.PatchDetails; a failure comes with an *Error.
func (c *Client) ApplyPatch(ctx context.Context, input string) (Result, error) {
	return c.tool(ctx, "POST", "/v1/apply_patch", nil, apitype.PatchParams{Input: input})
}

// Session is one entry of a session list: apitype.SessionEntry plus the
// owning agent, which operator lists of every agent carry.
type Session struct {
	apitype.SessionEntry
	Agent string `json:"agent,omitempty"`
}

// SessionList is the details object of Sessions.
type SessionList struct {
	Status   string    `json:"status"`
	Sessions []Session `json:"sessions"`
}

// SessionsOptions select the sessions of Sessions.
type SessionsOptions struct {
	// AllAgents lists every agent's sessions (operators only; sent as
	// all=true).
	AllAgents bool
}

// Sessions lists the sessions in scope (GET /v1/sessions): the caller's
// agent's, or every agent's with AllAgents. Decode the details into a
// SessionList.
func (c *Client) Sessions(ctx context.Context, opt SessionsOptions) (Result, error) {
	var q url.Values
	if opt.AllAgents {
		q = url.Values{"all": {"true"}}
	}
	return c.tool(ctx, "GET", "/v1/sessions", q, nil)
}

// LogOptions are the query of Log. Nil pointers are
// left out so the engine's defaults apply.
type LogOptions struct {
	Offset *int   // first line, 0-based
	Limit  *int   // lines
	Since  *int64 // journal cursor; excludes Offset
	Raw    bool   // skip the renderer
	Stream string // both (default), stdout or stderr
}

// Log reads a session's output by lines (GET /v1/sessions/{id}/log).
func (c *Client) Log(ctx context.Context, id string, opt LogOptions) (Result, error) {
	q := url.Values{}
	if opt.Offset != nil {
		q.Set("offset", strconv.Itoa(*opt.Offset))
	}
	if opt.Limit != nil {
		q.Set("limit", strconv.Itoa(*opt.Limit))
	}
	if opt.Since != nil {
		q.Set("since", strconv.FormatInt(*opt.Since, 10))
	}
	if opt.Raw {
		q.Set("raw", "true")
	}
	if opt.Stream != "" {
		q.Set("stream", opt.Stream)
	}
	return c.tool(ctx, "GET", sessionPath(id, "log"), q, nil)
}

// Kill starts the kill sequence of a running session and waits for its end
// state (POST /v1/sessions/{id}/kill).
func (c *Client) Kill(ctx context.Context, id string) (Result, error) {
	return c.tool(ctx, "POST", sessionPath(id, "kill"), nil, nil)
}

// Clear deletes a finished session (POST /v1/sessions/{id}/clear).
func (c *Client) Clear(ctx context.Context, id string) (Result, error) {
	return c.tool(ctx, "POST", sessionPath(id, "clear"), nil, nil)
}

// Remove kills a running session, withdraws a pending one, or deletes a
// finished one (DELETE /v1/sessions/{id}).
func (c *Client) Remove(ctx context.Context, id string) (Result, error) {
	return c.tool(ctx, "DELETE", sessionPath(id, ""), nil, nil)
}

// Health is the answer of GET /v1/health.
type Health struct {
	OK bool `json:"ok"`
	// Status is "ok", or "degraded" while exec refuses new sessions
	// (Disk says why).
	Status   string              `json:"status,omitempty"`
	Disk     *apitype.DiskStatus `json:"disk,omitempty"`
	Version  string              `json:"version"`
	UptimeMs int64               `json:"uptimeMs"`
}

// Health checks that the API answers (GET /v1/health; no token needed).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	b, err := c.request(ctx, "GET", "/v1/health", nil, nil)
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("decode health: %w", err)
	}
	return h, nil
}

// Agent is an agent as listed by Agents. Fields the server does not send
// stay zero.
type Agent struct {
	Name      string `json:"name"` // the agent id
	Workspace string `json:"workspace,omitempty"`
	// CreatedAt is the server's value as sent (epoch ms or a timestamp).
	CreatedAt json.RawMessage `json:"createdAt,omitempty"`
}

// AgentToken is the answer of AddAgent and RotateAgentToken: the token is
// shown this once; the server keeps only its hash.
type AgentToken struct {
	Name  string `json:"name"`
	Token string `json:"token"`
}

// Agents lists the agents (GET /v1/agents; operators only). The answer may
// be a bare array or {"agents":[…]}.
func (c *Client) Agents(ctx context.Context) ([]Agent, error) {
	b, err := c.request(ctx, "GET", "/v1/agents", nil, nil)
	if err != nil {
		return nil, err
	}
	var list []Agent
	if json.Unmarshal(b, &list) == nil {
		return list, nil
	}
	var wrapped struct {
		Agents []Agent `json:"agents"`
	}
	if err := json.Unmarshal(b, &wrapped); err != nil {
		return nil, fmt.Errorf("decode agents: %w", err)
	}
	return wrapped.Agents, nil
}

// AddAgent creates an agent (POST /v1/agents) and returns its token.
// workspace may be empty.
func (c *Client) AddAgent(ctx context.Context, name, workspace string) (AgentToken, error) {
	body := map[string]string{"name": name}
	if workspace != "" {
		body["workspace"] = workspace
	}
	return c.agentToken(ctx, "/v1/agents", body)
}

// RotateAgentToken replaces an agent's token (POST /v1/agents/{id}/token)
// and returns the new one; the old one stops working.
func (c *Client) RotateAgentToken(ctx context.Context, name string) (AgentToken, error) {
	return c.agentToken(ctx, "/v1/agents/"+url.PathEscape(name)+"/token", nil)
}

func (c *Client) agentToken(ctx context.Context, path string, body any) (AgentToken, error) {
	var t AgentToken
	b, err := c.request(ctx, "POST", path, nil, body)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("decode token: %w", err)
	}
	return t, nil
}

// RemoveAgent deletes an agent (DELETE /v1/agents/{id}); its token stops
// working.
func (c *Client) RemoveAgent(ctx context.Context, name string) error {
	_, err := c.request(ctx, "DELETE", "/v1/agents/"+url.PathEscape(name), nil, nil)
	return err
}

// Recording writes the PTY session id as an asciicast v2 file to w (GET
// /v1/sessions/{id}/recording). A session without a terminal is an
// *Error with code invalid_state.
func (c *Client) Recording(ctx context.Context, id string, w io.Writer) error {
	b, err := c.request(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/recording", nil, nil)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Call sends one request to any /v1 route that has no typed method here
// (approvals, the approvals file, policy explain, the ledger) and decodes
// a 2xx answer's JSON body into out when out is not nil. body, when not
// nil, is sent as JSON. A non-2xx answer is an *Error.
func (c *Client) Call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	b, err := c.request(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}

// LoginCode is a one-time control-UI login link.
type LoginCode struct {
	URL         string `json:"url"`
	ExpiresAtMs int64  `json:"expiresAtMs"`
}

// UILoginCode mints a one-time login link for the control UI (POST
// /v1/ui/login-code; operators only). The link is valid for 5 minutes and
// one sign-in.
func (c *Client) UILoginCode(ctx context.Context) (LoginCode, error) {
	var lc LoginCode
	b, err := c.request(ctx, "POST", "/v1/ui/login-code", nil, map[string]any{})
	if err != nil {
		return lc, err
	}
	if err := json.Unmarshal(b, &lc); err != nil {
		return lc, fmt.Errorf("decode login code: %w", err)
	}
	return lc, nil
}

// callJSON sends one request and decodes a 2xx answer into out; what names
// the answer in a decode error.
func (c *Client) callJSON(ctx context.Context, method, path string, body, out any, what string) error {
	b, err := c.request(ctx, method, path, nil, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}

// ExecDefaults returns an agent's exec defaults (GET
// /v1/agents/{id}/exec-defaults; operators only).
func (c *Client) ExecDefaults(ctx context.Context, agent string) (apitype.ExecDefaults, error) {
	var d apitype.ExecDefaults
	err := c.callJSON(ctx, "GET", "/v1/agents/"+url.PathEscape(agent)+"/exec-defaults", nil, &d, "exec defaults")
	return d, err
}

// SetExecDefaults replaces an agent's exec defaults (PUT
// /v1/agents/{id}/exec-defaults; operators only) and returns them as
// stored (values lower-cased).
func (c *Client) SetExecDefaults(ctx context.Context, agent string, d apitype.ExecDefaults) (apitype.ExecDefaults, error) {
	var out apitype.ExecDefaults
	err := c.callJSON(ctx, "PUT", "/v1/agents/"+url.PathEscape(agent)+"/exec-defaults", d, &out, "exec defaults")
	return out, err
}

// Doctor returns the findings of the gateway's home audit (GET
// /v1/doctor; operators only).
func (c *Client) Doctor(ctx context.Context) ([]apitype.Finding, error) {
	var out struct {
		Findings []apitype.Finding `json:"findings"`
	}
	err := c.callJSON(ctx, "GET", "/v1/doctor", nil, &out, "doctor")
	return out.Findings, err
}

// SandboxStatus returns every agent's sandbox and the sandbox containers
// (GET /v1/sandbox; operators only).
func (c *Client) SandboxStatus(ctx context.Context) (apitype.SandboxStatus, error) {
	var st apitype.SandboxStatus
	err := c.callJSON(ctx, "GET", "/v1/sandbox", nil, &st, "sandbox status")
	return st, err
}
