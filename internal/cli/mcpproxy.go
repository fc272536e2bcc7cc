package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
)

// socketEngine forwards tool calls to the engine that holds the home,
// over its engine socket: what `conch mcp` does while
// `conch serve` runs on the same home.
type socketEngine struct {
	agent, workdir string
	cfg            *config.Config
	hc             *http.Client
	// id names this proxy's calls (X-Conch-Proxy-Id), so that a stop can
	// have the engine answer them at once (stopCalls).
	id string
}

func newSocketEngine(dial func(ctx context.Context, network, addr string) (net.Conn, error), agent, workdir string, cfg *config.Config) *socketEngine {
	tr := &http.Transport{DialContext: dial}
	var b [16]byte
	rand.Read(b[:])
	return &socketEngine{agent: agent, workdir: workdir, cfg: cfg, hc: &http.Client{Transport: tr}, id: hex.EncodeToString(b[:])}
}

// stopCalls asks the engine to answer this proxy's calls in flight now, as
// it answers its own on a stop: an exec in its yield window returns
// running with its session id and the command keeps running. Calls of this
// proxy that reach the engine later are answered the same way.
func (p *socketEngine) stopCalls(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://engine/v1/proxies/"+p.id+"/stop", nil)
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("engine answered %s", resp.Status)
	}
	return nil
}

// ping reports whether the engine answers on the socket.
func (p *socketEngine) ping() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://engine/v1/health", nil)
	resp, err := p.hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

func (p *socketEngine) Call(ctx context.Context, agent, tool string, args json.RawMessage) apitype.Result {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://engine/v1/"+tool, bytes.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Conch-Agent", agent)
	req.Header.Set("X-Conch-Proxy", "mcp")
	req.Header.Set("X-Conch-Proxy-Id", p.id)
	if p.workdir != "" {
		req.Header.Set("X-Conch-Workdir", p.workdir)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		e := apitype.Errorf(apitype.CodeUnavailable, "conch engine unreachable over its socket: %v", err)
		return apitype.Result{Text: e.Message, Details: &apitype.ErrorDetails{Status: "error", Error: e}}
	}
	defer resp.Body.Close()
	var body struct {
		Text    string          `json:"text"`
		Details json.RawMessage `json:"details"`
		Error   *apitype.Error  `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		e := apitype.Errorf(apitype.CodeInternal, "bad answer from the engine: %v", err)
		return apitype.Result{Text: e.Message, Details: &apitype.ErrorDetails{Status: "error", Error: e}}
	}
	if body.Error != nil {
		status := "error"
		if tool == "process" || tool == "apply_patch" {
			status = "failed"
		}
		text := body.Text
		if text == "" {
			text = body.Error.Message
		}
		return apitype.Result{Text: text, Details: &apitype.ErrorDetails{Status: status, Error: body.Error}}
	}
	var d map[string]any
	json.Unmarshal(body.Details, &d)
	if !p.cfg.MCP.FullDetails {
		delete(d, "aggregated")
	}
	return apitype.Result{Text: body.Text, Details: d}
}

func (p *socketEngine) Config() *config.Config { return p.cfg }

// Stopping is nil: a proxy's calls run in the engine of the home's holder,
// which this process does not stop.
func (p *socketEngine) Stopping() <-chan struct{} { return nil }

// Approvals are decided by the engine's operators; a proxy does not
// elicit.
func (p *socketEngine) Pending(string, string) bool { return false }

func (p *socketEngine) DecideApproval(string, string, string) error {
	return errors.New("not available through the engine socket")
}

func (p *socketEngine) AwaitApproved(_ context.Context, _, sessionID string, _ time.Duration) apitype.Result {
	e := apitype.Errorf(apitype.CodeUnavailable, "approval of %s is decided by the gateway's operators", sessionID)
	return apitype.Result{Text: fmt.Sprint(e.Message), Details: &apitype.ErrorDetails{Status: "error", Error: e}}
}
