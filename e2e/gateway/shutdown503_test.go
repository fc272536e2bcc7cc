package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestShutdownAnswers503: while conch serve shuts down (held open by a
// request whose body is still arriving), every client that connects gets
// the documented answer, HTTP 503 unavailable "conch engine is shutting
// down.", on /v1 and /mcp alike, never a refused connection; once the
// process has exited, connections are refused. (They were refused as soon
// as the shutdown began.)
func TestShutdownAnswers503(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	addr := strings.TrimPrefix(g.Base, "http://")

	// A request in flight that keeps the shutdown waiting: its body
	// never completes (the gateway gives it up to 5 s).
	slowConn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slowConn.Close()
	// Expect: 100-continue makes the server answer "100 Continue" when
	// the handler starts reading the body: the event that says the
	// request is in its handler (without it, a SIGTERM that came first
	// found nothing in flight and the gateway exited at once).
	fmt.Fprintf(slowConn, "POST /v1/exec HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n", addr, g.Token)
	slowConn.SetReadDeadline(time.Now().Add(e2etest.Slow(10 * time.Second)))
	var got []byte
	buf := make([]byte, 256)
	for !strings.Contains(string(got), "100 Continue") {
		n, err := slowConn.Read(buf)
		if err != nil {
			t.Fatalf("the slow request's handler did not start reading its body: %v (read %q)", err, got)
		}
		got = append(got, buf[:n]...)
	}
	slowConn.SetReadDeadline(time.Time{})
	fmt.Fprint(slowConn, `{"command":`)

	exited := make(chan struct{})
	cmd := g.Cmd
	g.Cmd = nil // the test waits for it
	cmd.Process.Signal(syscall.SIGTERM)
	go func() { cmd.Wait(); close(exited) }()

	client := &http.Client{Timeout: e2etest.Slow(10 * time.Second), Transport: &http.Transport{DisableKeepAlives: true}}
	answered503 := 0
	deadline := time.Now().Add(e2etest.Slow(30 * time.Second))
	for i := 0; ; i++ {
		if time.Now().After(deadline) {
			t.Fatal("the gateway did not exit")
		}
		path := "/v1/health"
		if i%2 == 1 {
			path = "/mcp"
		}
		var req *http.Request
		if path == "/v1/health" {
			req, _ = http.NewRequest("GET", g.Base+path, nil)
		} else {
			req, _ = http.NewRequest("POST", g.Base+path, strings.NewReader(`{}`))
		}
		req.Header.Set("Authorization", "Bearer "+g.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			select {
			case <-exited:
				if answered503 == 0 {
					t.Fatal("no request was answered 503 during the shutdown")
				}
				return // refused once the process is gone: fine
			case <-time.After(e2etest.Slow(2 * time.Second)):
				// Still alive two seconds after a refusal: it refused
				// while shutting down.
			}
			var op *net.OpError
			if errors.As(err, &op) && strings.Contains(err.Error(), "refused") {
				t.Fatalf("connection refused while the gateway was still running its shutdown (after %d answers 503): %v", answered503, err)
			}
			t.Fatalf("request during the shutdown: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && answered503 == 0 && path == "/v1/health" {
			continue // before the shutdown began
		}
		var m struct {
			Error struct{ Code, Message string }
		}
		json.Unmarshal(b, &m)
		if resp.StatusCode != 503 || m.Error.Code != "unavailable" || m.Error.Message != "conch engine is shutting down." {
			if answered503 == 0 && path == "/mcp" {
				continue // an MCP answer from before the shutdown began
			}
			t.Fatalf("%s during the shutdown: %d %s", path, resp.StatusCode, b)
		}
		answered503++
	}
}
