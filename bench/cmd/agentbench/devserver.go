package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

// devServerStep is step 4: the tool calls a scripted agent needs for
// "start a dev server, wait until it serves, see its first request", and
// what the tool list costs a model. It runs against the conch under test
// and, with -baseline-conch, against an older build (the "before").
type devServerStep struct {
	Task    string         `json:"task"`
	Command string         `json:"command"`
	After   *devServerRuns `json:"after"`
	Before  *devServerRuns `json:"before,omitempty"`
}

// devServerRuns are one binary's figures.
type devServerRuns struct {
	Conch string `json:"conch"`
	// Calls per repetition (exec + wait + any polls until the request's
	// log line was seen).
	Calls []int `json:"calls"`
	// InWait counts the repetitions whose wait result already showed the
	// request's log line.
	InWait int `json:"inWait"`
	// ToolsListChars/Tokens: the tools/list result (exec and process,
	// the default agent) as JSON; tokens ≈ chars/4.
	ToolsListChars  int `json:"toolsListChars"`
	ToolsListTokens int `json:"toolsListTokens"`
	// InstructionsTokens: the initialize instructions.
	InstructionsTokens int `json:"instructionsTokens"`
}

const devServerTask = `start a dev server, wait until it serves, see its first request`

// requestLine is what http.server logs for the wait's own probe: the
// server's first request.
const requestLine = `"GET / HTTP/1.1" 200`

func (r *run) devServer() *devServerStep {
	if _, err := exec.LookPath("python3"); err != nil {
		r.note("devserver: python3 not installed; step skipped")
		return nil
	}
	step := &devServerStep{Task: devServerTask, Command: "python3 -m http.server PORT --bind 127.0.0.1"}
	step.After = r.devServerRuns(r.o.conch)
	if r.o.baseline != "" {
		step.Before = r.devServerRuns(r.o.baseline)
	}
	return step
}

func (r *run) devServerRuns(bin string) *devServerRuns {
	s, err := startServer(r.ctx, bin, `{"quotas":{"execPerSecond":0}}`)
	if err != nil {
		r.fail("devserver %s: %v", bin, err)
		return nil
	}
	defer func() {
		if n := s.Close(); n > 0 {
			r.note("devserver: killed %d supervisor(s) left running", n)
		}
	}()
	out := &devServerRuns{Conch: bin}
	if tl, err := s.Session().ListTools(r.ctx, nil); err != nil {
		r.fail("devserver: tools/list: %v", err)
	} else {
		b, _ := json.Marshal(tl)
		out.ToolsListChars, out.ToolsListTokens = len([]rune(string(b))), benchkit.ApproxTokens(string(b))
	}
	if ir := s.Session().InitializeResult(); ir != nil {
		out.InstructionsTokens = benchkit.ApproxTokens(ir.Instructions)
	}
	for i := 0; i < r.o.devN; i++ {
		n, inWait, err := r.devServerOnce(s)
		if err != nil {
			r.fail("devserver #%d (%s): %v", i, bin, err)
			continue
		}
		out.Calls = append(out.Calls, n)
		if inWait {
			out.InWait++
		}
	}
	return out
}

// devServerOnce plays the agent once: exec in the background, wait
// until=http, then poll until the request's log line shows (at most 5
// polls). It returns the calls made and whether the wait showed the line.
func (r *run) devServerOnce(s *benchkit.Server) (int, bool, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, false, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	calls := 1
	e, err := s.Call(r.ctx, time.Minute, "exec", map[string]any{
		"command": fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1", port), "background": true,
	})
	if err != nil {
		return calls, false, err
	}
	id := e.Str("sessionId")
	if e.IsError || id == "" {
		return calls, false, fmt.Errorf("exec: %s", benchkit.Clip(e.Text, 300))
	}
	defer func() {
		// kill waits for the end; remove alone would return at once and
		// leave the supervisor ending while the server closes.
		s.Call(r.ctx, time.Minute, "process", map[string]any{"action": "kill", "sessionId": id})
		s.Call(r.ctx, time.Minute, "process", map[string]any{"action": "remove", "sessionId": id})
	}()
	calls++
	w, err := s.Call(r.ctx, time.Minute, "process", map[string]any{
		"action": "wait", "sessionId": id, "until": "http", "url": fmt.Sprintf("http://127.0.0.1:%d/", port), "timeout": 30000,
	})
	if err != nil {
		return calls, false, err
	}
	if w.Str("fired") != "http" {
		return calls, false, fmt.Errorf("wait: %s", benchkit.Clip(w.Text, 300))
	}
	if strings.Contains(w.Text, requestLine) {
		return calls, true, nil
	}
	for range 5 {
		calls++
		p, err := s.Call(r.ctx, time.Minute, "process", map[string]any{"action": "poll", "sessionId": id, "timeout": 0})
		if err != nil {
			return calls, false, err
		}
		if strings.Contains(p.Text, requestLine) {
			return calls, false, nil
		}
	}
	return calls, false, fmt.Errorf("the request's log line never showed")
}

func printDevServer(w interface{ Write([]byte) (int, error) }, s *devServerStep) {
	fmt.Fprintf(w, "4. Calls to %q\n", s.Task)
	fmt.Fprintf(w, "   agent: exec %s background=true; process wait until=http; poll until the request's log line shows\n", s.Command)
	row := func(name string, d *devServerRuns) {
		if d == nil {
			return
		}
		fmt.Fprintf(w, "  %-7s calls %v (median %d); request shown by the wait %d/%d; tools/list %d chars ≈ %d tokens; instructions ≈ %d tokens\n",
			name, d.Calls, medianInt(d.Calls), d.InWait, len(d.Calls), d.ToolsListChars, d.ToolsListTokens, d.InstructionsTokens)
		fmt.Fprintf(w, "          %s\n", d.Conch)
	}
	row("before", s.Before)
	row("after", s.After)
	fmt.Fprintln(w)
}

func medianInt(v []int) int {
	if len(v) == 0 {
		return 0
	}
	c := append([]int(nil), v...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c[len(c)/2]
}
