package e2etest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Gateway is a running `conch serve`.
type Gateway struct {
	T        testing.TB
	Home     string
	Cmd      *exec.Cmd
	Base     string
	Token    string // agent main
	Operator string
	Banner   string // the "listening on" line
	// Stderr is the conch process's stderr (NewLog).
	Stderr *Log
}

// ListenRE matches the "listening on" line of `conch serve` and captures
// its base URL.
var ListenRE = regexp.MustCompile(`listening on (https?://[0-9.]+:\d+)`)

// StartGateway runs `conch serve` on home on a free loopback port.
func StartGateway(t testing.TB, home string) *Gateway {
	t.Helper()
	return StartServe(t, home, nil, "--listen", "127.0.0.1:0")
}

// StartServe runs `conch serve --home home` with args and env added to
// conch's environment, waits for its "listening on" line and reads the
// first agent's and the operator's tokens. The test's cleanup stops it.
func StartServe(t testing.TB, home string, env []string, args ...string) *Gateway {
	t.Helper()
	g := &Gateway{T: t, Home: home}
	cmd := exec.Command(ConchBin, append([]string{"serve", "--home", home, "--log-level", "warn"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr *os.File
	g.Stderr, stderr = NewLog(t, "conch serve")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.Cmd = cmd
	t.Cleanup(func() { g.Stop() })
	sc := bufio.NewScanner(out)
	deadline := time.AfterFunc(Slow(20*time.Second), func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "cat_") && g.Token == "" {
			g.Token = strings.TrimSpace(line)
		}
		if m := ListenRE.FindStringSubmatch(line); m != nil {
			g.Base = m[1]
			g.Banner = line
			break
		}
	}
	go io.Copy(io.Discard, out)
	if g.Base == "" {
		t.Fatal("conch serve did not start")
	}
	b, err := os.ReadFile(filepath.Join(home, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	g.Operator = strings.TrimSpace(string(b))
	return g
}

// Stop ends the gateway politely (SIGTERM), then firmly.
func (g *Gateway) Stop() {
	if g.Cmd != nil && g.Cmd.ProcessState == nil {
		g.Cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { g.Cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(Slow(10 * time.Second)):
			g.Cmd.Process.Kill()
			<-done
		}
	}
}

// Do sends a request and decodes a JSON answer.
func (g *Gateway) Do(method, path, token string, body any, hdr map[string]string) (int, map[string]any) {
	g.T.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, g.Base+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.T.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// MCPClient connects the official Go SDK client over streamable HTTP.
func (g *Gateway) MCPClient(token string) *Conch {
	g.T.Helper()
	c := &Conch{t: g.T, Home: g.Home}
	client := mcp.NewClient(&mcp.Implementation{Name: "conch-e2e-http", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.Mu.Lock()
			c.Logs = append(c.Logs, req.Params)
			c.Mu.Unlock()
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: g.Base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), Slow(20*time.Second))
	defer cancel()
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		g.T.Fatalf("mcp connect: %v", err)
	}
	c.CS = cs
	g.T.Cleanup(c.Close)
	return c
}

// sseReader reads server-sent events.
type SSEEvent struct{ ID, Event, Data string }

// ReadSSE reads the event stream at url until want accepts an event or
// within passes, and returns the events read.
func ReadSSE(t testing.TB, url, token string, hdr map[string]string, want func(SSEEvent) bool, within time.Duration) []SSEEvent {
	t.Helper()
	return ReadSSEOpen(t, url, token, hdr, nil, want, within)
}

// ReadSSEOpen is ReadSSE that calls opened, if not nil, once the stream's
// headers have arrived: the server has subscribed the stream by then, so
// what opened causes is on it.
func ReadSSEOpen(t testing.TB, url, token string, hdr map[string]string, opened func(), want func(SSEEvent) bool, within time.Duration) []SSEEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Slow(within))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if opened != nil {
		opened()
	}
	var got []SSEEvent
	var cur SSEEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Event != "" {
				got = append(got, cur)
				if want(cur) {
					return got
				}
			}
			cur = SSEEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[6:]
		}
	}
	t.Fatalf("SSE ended without the awaited event; got %v", got)
	return nil
}
