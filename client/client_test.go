package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/client"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, h http.HandlerFunc, opt client.Options) *client.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	opt.Gateway = srv.URL + "/v1/"
	c, err := client.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func TestNewValidates(t *testing.T) {
	for _, opt := range []client.Options{{}, {Gateway: "ftp://x"}, {Gateway: "127.0.0.1:7878"}} {
		if _, err := client.New(opt); err == nil {
			t.Errorf("New(%+v) accepted", opt)
		}
	}
}

func TestExecSendsParamsAndCredentials(t *testing.T) {
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/exec" {
			t.Errorf("got %s %s", r.Method, r.URL.Path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer tok" {
			t.Errorf("Authorization = %q", got)
		}
		if got := r.Header.Get("X-Conch-Agent"); got != "build" {
			t.Errorf("X-Conch-Agent = %q", got)
		}
		var p apitype.ExecParams
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.Command != "echo hi" || p.Timeout == nil || *p.Timeout != 5 {
			t.Errorf("body: %+v %v", p, err)
		}
		writeJSON(w, 200, map[string]any{"text": "hi", "details": map[string]any{"status": "completed", "exitCode": 0, "aggregated": "hi"}})
	}, client.Options{Token: "tok", Agent: "build"})
	five := 5.0
	res, err := c.Exec(testCtx(t), apitype.ExecParams{Command: "echo hi", Timeout: &five})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "hi" || res.Status() != "completed" {
		t.Fatalf("result %+v", res)
	}
	var d apitype.ExecDetails
	if err := res.Decode(&d); err != nil || d.ExitCode == nil || *d.ExitCode != 0 {
		t.Fatalf("details %+v %v", d, err)
	}
}

func TestToolErrorKeepsResult(t *testing.T) {
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 403, map[string]any{
			"error":   map[string]string{"code": "denied", "message": "exec denied: allowlist miss"},
			"text":    "exec denied: allowlist miss",
			"details": map[string]any{"status": "error", "error": map[string]string{"code": "denied", "message": "exec denied: allowlist miss"}},
		})
	}, client.Options{})
	res, err := c.Process(testCtx(t), map[string]any{"action": "poll", "sessionId": "x"})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 403 || ae.Code != "denied" || ae.Message != "exec denied: allowlist miss" {
		t.Fatalf("err = %#v", err)
	}
	if res.Text != "exec denied: allowlist miss" || res.Status() != "error" {
		t.Fatalf("result %+v", res)
	}
}

func TestErrorWithoutBody(t *testing.T) {
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		http.Error(w, "upstream down", http.StatusBadGateway)
	}, client.Options{})
	_, err := c.Kill(testCtx(t), "calm-gulf")
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "" || ae.Message != "upstream down" || ae.RetryAfter != 3*time.Second {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(err.Error(), "HTTP 502") {
		t.Fatalf("Error() = %q", err.Error())
	}
}

func TestSessionRoutes(t *testing.T) {
	var mu sync.Mutex
	var got []string
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		if r.URL.Path == "/v1/sessions" {
			writeJSON(w, 200, map[string]any{"text": "…", "details": map[string]any{"status": "completed", "sessions": []map[string]any{
				{"sessionId": "calm-gulf", "status": "running", "agent": "build", "command": "sleep 5"},
			}}})
			return
		}
		writeJSON(w, 200, map[string]any{"text": "ok", "details": map[string]any{"status": "completed"}})
	}, client.Options{})
	ctx := testCtx(t)
	res, err := c.Sessions(ctx, client.SessionsOptions{AllAgents: true})
	if err != nil {
		t.Fatal(err)
	}
	var list client.SessionList
	if err := res.Decode(&list); err != nil || len(list.Sessions) != 1 || list.Sessions[0].Agent != "build" || list.Sessions[0].SessionID != "calm-gulf" {
		t.Fatalf("sessions %+v %v", list, err)
	}
	off, lim := 0, 10
	if _, err := c.Log(ctx, "calm gulf", client.LogOptions{Offset: &off, Limit: &lim, Raw: true, Stream: "stderr"}); err != nil {
		t.Fatal(err)
	}
	for _, call := range []func(context.Context, string) (client.Result, error){c.Kill, c.Clear, c.Remove} {
		if _, err := call(ctx, "calm-gulf"); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"GET /v1/sessions?all=true",
		"GET /v1/sessions/calm%20gulf/log?limit=10&offset=0&raw=true&stream=stderr",
		"POST /v1/sessions/calm-gulf/kill",
		"POST /v1/sessions/calm-gulf/clear",
		"DELETE /v1/sessions/calm-gulf",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestStreamResumes(t *testing.T) {
	var mu sync.Mutex
	var conns []string // Last-Event-ID and since of each connection
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sessions/calm-gulf/stream" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		conns = append(conns, r.Header.Get("Last-Event-ID")+"|"+r.URL.Query().Get("since"))
		n := len(conns)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		switch n {
		case 1:
			// Two chunks, a comment, then the connection breaks.
			fmt.Fprint(w, ": ping\n\nid: 3\nevent: output\ndata: {\"cursor\":3,\"stream\":\"stdout\",\"text\":\"a\\n\"}\n\n")
			fmt.Fprint(w, "retry: 10\nid: 7\nevent: output\ndata: {\"cursor\":7,\"stream\":\"stderr\",\n")
			fmt.Fprint(w, "data: \"text\":\"bcd\\n\"}\n\n")
		default:
			fmt.Fprint(w, "id: 9\r\nevent: output\r\ndata: {\"cursor\":9,\"stream\":\"stdout\",\"text\":\"e\\n\"}\r\n\r\n")
			fmt.Fprint(w, "event: end\ndata: {\"state\":\"killed\",\"exitCode\":null,\"signal\":\"SIGTERM\",\"killedBy\":\"timeout\"}\n\n")
		}
	}, client.Options{})
	var out []string
	end, err := c.Stream(testCtx(t), "calm-gulf", client.StreamOptions{Since: 0}, func(o client.Output) error {
		out = append(out, fmt.Sprintf("%d %s %q", o.Cursor, o.Stream, o.Text))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `3 stdout "a\n"|7 stderr "bcd\n"|9 stdout "e\n"`; strings.Join(out, "|") != want {
		t.Fatalf("output %s, want %s", strings.Join(out, "|"), want)
	}
	if end.State != "killed" || end.ExitCode != nil || *end.Signal != "SIGTERM" || *end.KilledBy != "timeout" {
		t.Fatalf("end %+v", end)
	}
	if strings.Join(conns, ",") != "|0,7|7" {
		t.Fatalf("connections %v", conns)
	}
}

func TestStreamErrors(t *testing.T) {
	calls := 0
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		calls++
		if r.URL.Path == "/v1/sessions/gone/stream" {
			writeJSON(w, 404, map[string]any{"error": map[string]string{"code": "not_found", "message": "No session found for gone"}})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 1\n\n") // never any output: give up after the retries
	}, client.Options{})
	ctx := testCtx(t)
	_, err := c.Stream(ctx, "gone", client.StreamOptions{}, func(client.Output) error { return nil })
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code != "not_found" || calls != 1 {
		t.Fatalf("err = %v after %d calls", err, calls)
	}
	calls = 0
	_, err = c.Stream(ctx, "silent", client.StreamOptions{MaxRetries: 2}, func(client.Output) error { return nil })
	if !errors.Is(err, io.ErrUnexpectedEOF) || calls != 3 {
		t.Fatalf("err = %v after %d calls", err, calls)
	}
	// The callback's error ends the stream unchanged.
	c2 := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "id: 1\nevent: output\ndata: {\"cursor\":1,\"text\":\"x\"}\n\n")
	}, client.Options{})
	stop := errors.New("stop")
	if _, err := c2.Stream(ctx, "x", client.StreamOptions{}, func(client.Output) error { return stop }); err != stop {
		t.Fatalf("err = %v", err)
	}
}

func TestSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "conch-client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Conch-Agent") != "main" {
			t.Errorf("headers %v", r.Header)
		}
		writeJSON(w, 200, map[string]any{"ok": true, "version": "1.2.3", "uptimeMs": 5})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := client.New(client.Options{Socket: sock, Agent: "main"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(testCtx(t))
	if err != nil || !h.OK || h.Version != "1.2.3" || h.UptimeMs != 5 {
		t.Fatalf("health %+v %v", h, err)
	}
}

func TestAgents(t *testing.T) {
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/agents":
			writeJSON(w, 200, map[string]any{"agents": []map[string]any{{"name": "main", "workspace": "/w", "createdAt": 1}}})
		case "POST /v1/agents":
			var in map[string]string
			json.NewDecoder(r.Body).Decode(&in)
			if in["name"] == "main" {
				writeJSON(w, 409, map[string]any{"error": map[string]string{"code": "conflict", "message": "agent main exists"}})
				return
			}
			writeJSON(w, 200, map[string]string{"name": in["name"], "token": "cat_new"})
		case "POST /v1/agents/build/token":
			writeJSON(w, 200, map[string]string{"name": "build", "token": "cat_rotated"})
		case "DELETE /v1/agents/build":
			writeJSON(w, 200, map[string]any{"name": "build", "removed": true})
		default:
			writeJSON(w, 404, map[string]any{"error": map[string]string{"code": "not_found", "message": "no route"}})
		}
	}, client.Options{Token: "op"})
	ctx := testCtx(t)
	list, err := c.Agents(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "main" || list[0].Workspace != "/w" {
		t.Fatalf("agents %+v %v", list, err)
	}
	if tok, err := c.AddAgent(ctx, "build", "/src"); err != nil || tok.Token != "cat_new" {
		t.Fatalf("add %+v %v", tok, err)
	}
	var ae *client.Error
	if _, err := c.AddAgent(ctx, "main", ""); !errors.As(err, &ae) || ae.Code != "conflict" {
		t.Fatalf("add existing: %v", err)
	}
	if tok, err := c.RotateAgentToken(ctx, "build"); err != nil || tok.Token != "cat_rotated" {
		t.Fatalf("rotate %+v %v", tok, err)
	}
	if err := c.RemoveAgent(ctx, "build"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveAgent(ctx, "nobody"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("remove unknown: %v", err)
	}
}

// Example runs a command on a gateway (here a stand-in for one) and prints
// its output.
func Example() {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"text": "hi", "details": map[string]any{"status": "completed", "exitCode": 0, "aggregated": "hi"}})
	}))
	defer gw.Close()

	c, err := client.New(client.Options{Gateway: gw.URL, Token: "cat_…"})
	if err != nil {
		panic(err)
	}
	res, err := c.Exec(context.Background(), map[string]any{"command": "echo hi"})
	if err != nil {
		panic(err)
	}
	var d apitype.ExecDetails
	res.Decode(&d)
	fmt.Println(res.Status(), *d.ExitCode, *d.Aggregated)
	// Output: completed 0 hi
}
