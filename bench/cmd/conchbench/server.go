package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// server is one `conch mcp` process on a fresh temporary home, driven
// through the official Go SDK client over stdio.
type server struct {
	bin  string // absolute path of the conch binary
	root string // temporary directory holding home, work and time.txt
	home string
	cmd  *exec.Cmd
	cs   *mcp.ClientSession

	// timeFile is where /usr/bin/time -v writes its report; "" when conch
	// is not run under time.
	timeFile string
	// TimeReport is the text /usr/bin/time -v wrote, set by close.
	timeReport string
}

// startServer starts `bin mcp --home <fresh home>`, under timeBin -v when
// timeBin is not "", and connects to it.
func startServer(ctx context.Context, bin, timeBin string) (*server, error) {
	root, err := os.MkdirTemp("", "conchbench-")
	if err != nil {
		return nil, err
	}
	// Supervisors carry the absolute, symlink-free home in their argv;
	// matching them in /proc needs the same spelling.
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	s := &server{bin: bin, root: root, home: filepath.Join(root, "home")}
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	// The benchmark measures the engine, not the per-agent exec rate
	// limit (quotas.execPerSecond, 50/s by default): turn it off.
	if err := os.MkdirAll(s.home, 0o700); err == nil {
		os.WriteFile(filepath.Join(s.home, "config.json"), []byte(`{"quotas":{"execPerSecond":0}}`+"\n"), 0o600)
	}
	args := []string{bin, "mcp", "--home", s.home, "--workdir", work}
	if timeBin != "" {
		s.timeFile = filepath.Join(root, "time.txt")
		args = append([]string{timeBin, "-v", "-o", s.timeFile}, args...)
	}
	s.cmd = exec.Command(args[0], args[1:]...)
	s.cmd.Dir = work
	s.cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "conchbench", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s.cs, err = client.Connect(cctx, &mcp.CommandTransport{Command: s.cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("connect to conch mcp: %w", err)
	}
	return s, nil
}

// pid returns the pid of the conch mcp process itself (not of
// /usr/bin/time around it).
func (s *server) pid() (int, error) {
	if s.timeFile == "" {
		return s.cmd.Process.Pid, nil
	}
	for _, p := range conchProcs(s.bin, "mcp", s.home) {
		if p.ppid == s.cmd.Process.Pid {
			return p.pid, nil
		}
	}
	return 0, errors.New("conch mcp process not found under /usr/bin/time")
}

// supervisors lists the live supervisor processes of this server's home.
func (s *server) supervisors() []proc { return conchProcs(s.bin, "supervise", s.home) }

// close disconnects (conch sees EOF on stdin and exits), kills any
// supervisor left running, keeps the /usr/bin/time report and removes
// the temporary directory. It returns how many supervisors were killed.
func (s *server) close() int {
	if s.cs != nil {
		s.cs.Close()
		s.cs = nil
	}
	killed := killSupervisors(s.bin, s.home)
	if s.timeFile != "" {
		b, _ := os.ReadFile(s.timeFile)
		s.timeReport = string(b)
	}
	os.RemoveAll(s.root)
	return killed
}

// result is a decoded tool result.
type result struct {
	Text    string
	D       map[string]any
	IsError bool
}

func (r result) str(k string) string {
	v, _ := r.D[k].(string)
	return v
}

// num returns a numeric detail, or -1 when it is absent or not a number.
func (r result) num(k string) float64 {
	v, ok := r.D[k].(float64)
	if !ok {
		return -1
	}
	return v
}

// call invokes a tool, giving up after limit.
func (s *server) call(ctx context.Context, limit time.Duration, tool string, args map[string]any) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return result{}, fmt.Errorf("%s %s: %w", tool, brief(args), err)
	}
	r := result{IsError: res.IsError}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			r.Text = tc.Text
		}
	}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &r.D)
	}
	if err != nil {
		return r, fmt.Errorf("%s %s: decode details: %w", tool, brief(args), err)
	}
	return r, nil
}

// completed checks that r is a successful, finished command.
func (r result) completed(what string) error {
	if r.IsError || r.str("status") != "completed" || r.num("exitCode") != 0 {
		return fmt.Errorf("%s: status %q exitCode %v isError %v: %s", what, r.str("status"), r.D["exitCode"], r.IsError, clip(r.Text, 300))
	}
	return nil
}

// runToEnd runs exec args and, if the command was backgrounded, polls it
// until it ends. It returns the last result and whether the command had
// to be polled.
func (s *server) runToEnd(ctx context.Context, limit time.Duration, args map[string]any) (result, bool, error) {
	deadline := time.Now().Add(limit)
	r, err := s.call(ctx, limit, "exec", args)
	if err != nil || r.str("status") != "running" {
		return r, false, err
	}
	id := r.str("sessionId")
	for r.str("status") == "running" {
		left := time.Until(deadline)
		if left <= 0 {
			return r, true, fmt.Errorf("exec %s: still running after %v", brief(args), limit)
		}
		r, err = s.call(ctx, left+10*time.Second, "process", map[string]any{
			"action": "poll", "sessionId": id, "timeout": min(left.Milliseconds(), 120000),
		})
		if err != nil {
			return r, true, err
		}
		if r.IsError {
			return r, true, fmt.Errorf("poll %s: %s", id, clip(r.Text, 300))
		}
	}
	return r, true, nil
}

// brief renders tool arguments for error messages.
func brief(args map[string]any) string {
	b, _ := json.Marshal(args)
	return clip(string(b), 160)
}

// clip shortens s to about n bytes for messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + " … " + s[len(s)-n/2:]
}

// stripNotices removes the "[conch event] …" lines conch puts in front of
// a result's text when a background session ended since the last call.
func stripNotices(text string) string {
	if !strings.HasPrefix(text, "[conch event] ") {
		return text
	}
	for strings.HasPrefix(text, "[conch event] ") {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			return ""
		}
		text = text[i+1:]
	}
	return strings.TrimPrefix(text, "\n")
}
