// Package client is a Go client for conch's HTTP API: it
// runs commands with the exec tool, drives sessions with the process tool,
// follows a session's output over server-sent events, and manages agents.
//
// A Client talks either to a gateway over HTTP(S) with a bearer token
// (Options.Gateway) or to the local engine socket $CONCH_HOME/run/engine.sock
// (Options.Socket), where the file permission grants operator rights and no
// token is needed. Operators act for an agent with Options.Agent, sent as
// the X-Conch-Agent header.
//
// Tool calls answer a [Result]: the text meant for a model and the details
// object for programs, exactly as the engine produced them (package apitype
// describes their shapes). A run that fails (a non-zero exit, a kill, a
// timeout) is a Result, not an error: an error is returned only when the
// API itself refused or failed the call, as an [*Error] carrying the HTTP
// status and the error code (the table of docs/gateway.md). For tool routes the
// Result that came with the failure (its text and details) is returned
// alongside the error.
//
// The package imports only apitype and the standard library, so programs
// can use it without pulling in the engine.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Options configure a Client. Exactly one of Gateway and Socket is needed;
// Gateway wins when both are set.
type Options struct {
	// Gateway is the base URL of a conch gateway, e.g.
	// "http://127.0.0.1:7878". A trailing "/" or "/v1" is ignored.
	Gateway string
	// Socket is the path of an engine socket ($CONCH_HOME/run/engine.sock).
	Socket string
	// Token is the bearer token (an agent token or the operator token).
	// Empty sends no Authorization header, which is what the socket wants.
	Token string
	// Agent, if set, is sent as X-Conch-Agent: the agent an operator acts
	// for. Agents' own tokens fix their agent; leave it empty for them.
	Agent string
	// Workdir, if set, is sent as X-Conch-Workdir: the default workspace
	// of the calls (exec's workdir default, apply_patch's workspace) when
	// the agent has none configured. Only the engine socket honours it.
	Workdir string
	// HTTPClient is used for Gateway requests; nil means a client with no
	// overall timeout (streams and long polls are bounded by the caller's
	// context instead). It is ignored for Socket.
	HTTPClient *http.Client
}

// Client calls one conch API. It is safe for concurrent use. The zero
// value is not usable; create one with New.
type Client struct {
	base    string // scheme://host, no trailing slash
	token   string
	agent   string
	workdir string
	hc      *http.Client
}

// New returns a client for opt. It does not connect: the first call does.
func New(opt Options) (*Client, error) {
	c := &Client{token: opt.Token, agent: opt.Agent, workdir: opt.Workdir}
	switch {
	case opt.Gateway != "":
		u, err := url.Parse(opt.Gateway)
		if err != nil {
			return nil, fmt.Errorf("client: gateway URL: %w", err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("client: gateway URL %q: want http://HOST:PORT or https://HOST:PORT", opt.Gateway)
		}
		c.base = strings.TrimSuffix(strings.TrimSuffix(strings.TrimRight(opt.Gateway, "/"), "/v1"), "/")
		c.hc = opt.HTTPClient
		if c.hc == nil {
			c.hc = &http.Client{}
		}
	case opt.Socket != "":
		path := opt.Socket
		var d net.Dialer
		c.base = "http://localhost"
		c.hc = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", path)
			},
			MaxIdleConns:    4,
			IdleConnTimeout: 30 * time.Second,
		}}
	default:
		return nil, errors.New("client: Options.Gateway or Options.Socket is required")
	}
	return c, nil
}

// Error is a call the API refused or failed: the HTTP status and the error
// object of the answer. Code is empty when the answer
// had no error object (a proxy's error page, for instance).
type Error struct {
	Status  int    // HTTP status
	Code    string // e.g. "not_found", "denied", "unavailable"
	Message string
	// RetryAfter is the server's Retry-After (rate_limited), else 0.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("%s (%s, HTTP %d)", msg, e.Code, e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d)", msg, e.Status)
}

// Result is the answer of a tool route: the text for a model and the raw
// details object (one of apitype's *Details shapes, chosen by its
// "status").
type Result struct {
	Text    string          `json:"text"`
	Details json.RawMessage `json:"details"`
}

// Status returns details.status ("completed", "failed", "running",
// "approval-pending", "error", …), or "" when there is none.
func (r Result) Status() string {
	var d struct {
		Status string `json:"status"`
	}
	json.Unmarshal(r.Details, &d)
	return d.Status
}

// Decode unmarshals the details into v, a pointer to the apitype type of
// the call: exec's *apitype.ExecDetails (status approval-pending:
// *apitype.ApprovalDetails), process's *apitype.PollDetails,
// LogDetails, ListDetails, WaitDetails, SearchDetails, ScreenDetails or
// StatusDetails by action, apply_patch's *apitype.PatchDetails, and
// *apitype.ErrorDetails for a failure.
func (r Result) Decode(v any) error {
	if len(r.Details) == 0 {
		return errors.New("client: result has no details")
	}
	return json.Unmarshal(r.Details, v)
}

// errorBody is the error answer of every route; tool routes add the
// result fields.
type errorBody struct {
	Error   *struct{ Code, Message string } `json:"error"`
	Text    *string                         `json:"text"`
	Details json.RawMessage                 `json:"details"`
}

// request sends one API request and returns the response body of a 2xx
// answer. A non-2xx answer is returned as an *Error together with its
// body.
func (c *Client) request(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	c.authorize(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return b, apiError(resp, b)
	}
	return b, nil
}

func (c *Client) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.workdir != "" {
		req.Header.Set("X-Conch-Workdir", c.workdir)
	}
	if c.agent != "" {
		req.Header.Set("X-Conch-Agent", c.agent)
	}
}

// apiError builds the *Error of a non-2xx answer.
func apiError(resp *http.Response, body []byte) *Error {
	e := &Error{Status: resp.StatusCode}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
	} else {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "…"
		}
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	return e
}

// decodeResult reads a tool answer. An answer without "text" and
// "details" members is taken as a bare details object.
func decodeResult(b []byte) (Result, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return Result{}, fmt.Errorf("decode answer: %w", err)
	}
	_, hasText := m["text"]
	det, hasDetails := m["details"]
	if !hasText && !hasDetails {
		return Result{Details: json.RawMessage(b)}, nil
	}
	var r Result
	if hasText {
		json.Unmarshal(m["text"], &r.Text)
	}
	if hasDetails && string(det) != "null" {
		r.Details = det
	}
	return r, nil
}

// tool performs a call on a tool route: the result and, for a refused or
// failed call, the *Error with the result that came with it.
func (c *Client) tool(ctx context.Context, method, path string, query url.Values, body any) (Result, error) {
	b, err := c.request(ctx, method, path, query, body)
	var ae *Error
	if errors.As(err, &ae) {
		var eb errorBody
		var r Result
		if json.Unmarshal(b, &eb) == nil {
			if eb.Text != nil {
				r.Text = *eb.Text
			}
			r.Details = eb.Details
		}
		if r.Text == "" {
			r.Text = ae.Message
		}
		return r, err
	}
	if err != nil {
		return Result{}, err
	}
	return decodeResult(b)
}

// sessionPath returns /v1/sessions/{id}[/suffix] with id escaped.
func sessionPath(id, suffix string) string {
	p := "/v1/sessions/" + url.PathEscape(id)
	if suffix != "" {
		p += "/" + suffix
	}
	return p
}
