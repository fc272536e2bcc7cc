package benchkit

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
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerOptions say how [StartServer] runs `conch mcp`.
type ServerOptions struct {
	// Name is the MCP client's name and the prefix of the temporary
	// directory ("conchbench", "agentbench").
	Name string
	// Config is written, with a newline, as the home's config.json.
	Config string
	// TimeBin, when not "", is a GNU time run as `TimeBin -v -o FILE`
	// around conch; its report is in [Server.TimeReport] after Close.
	TimeBin string
	// StripNotices makes Call remove the "[conch event] …" lines from the
	// top of every result's text, and then one leading newline even when
	// there were none (see [StripNotices] for the exact removal).
	StripNotices bool
	// Env is added to conch's environment (K=V entries).
	Env []string
	// Home, when not "", is the conch home to use instead of a fresh one
	// (it must exist; Close leaves it; Config is not written).
	Home string
}

// Server is one `conch mcp` process on a fresh temporary home, driven
// through the official Go SDK client over stdio.
type Server struct {
	Bin  string // absolute path of the conch binary
	Root string // temporary directory holding Home, Work and time.txt
	Home string
	Work string // conch's --workdir and working directory
	Cmd  *exec.Cmd
	// TimeReport is the text GNU time -v wrote, set by Close when the
	// server ran under ServerOptions.TimeBin.
	TimeReport string

	cs       *mcp.ClientSession
	opts     ServerOptions
	timeFile string // where time -v writes its report; "" without TimeBin
}

// StartServer starts `bin mcp --home <fresh home> --workdir <fresh dir>`,
// under opts.TimeBin -v when that is not "", and connects to it.
func StartServer(ctx context.Context, bin string, opts ServerOptions) (*Server, error) {
	root, err := os.MkdirTemp("", opts.Name+"-")
	if err != nil {
		return nil, err
	}
	// Supervisors carry the absolute, symlink-free home in their argv;
	// matching them in /proc needs the same spelling.
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	s := &Server{Bin: bin, Root: root, Home: filepath.Join(root, "home"), Work: filepath.Join(root, "work"), opts: opts}
	if opts.Home != "" {
		s.Home = opts.Home
	}
	for _, d := range []string{s.Home, s.Work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
	}
	if opts.Home == "" {
		if err := os.WriteFile(filepath.Join(s.Home, "config.json"), []byte(opts.Config+"\n"), 0o600); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
	}
	args := []string{bin, "mcp", "--home", s.Home, "--workdir", s.Work}
	if opts.TimeBin != "" {
		s.timeFile = filepath.Join(root, "time.txt")
		args = append([]string{opts.TimeBin, "-v", "-o", s.timeFile}, args...)
	}
	s.Cmd = exec.Command(args[0], args[1:]...)
	s.Cmd.Dir = s.Work
	s.Cmd.Stderr = os.Stderr
	if opts.Env != nil {
		s.Cmd.Env = append(os.Environ(), opts.Env...)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: opts.Name, Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s.cs, err = client.Connect(cctx, &mcp.CommandTransport{Command: s.Cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("connect to conch mcp: %w", err)
	}
	return s, nil
}

// procs selects the conch processes of this server's home.
func (s *Server) procs() Filter { return Filter{Bin: s.Bin, Home: s.Home} }

// PID returns the pid of the conch mcp process itself (not of GNU time
// around it).
func (s *Server) PID() (int, error) {
	if s.timeFile == "" {
		return s.Cmd.Process.Pid, nil
	}
	for _, p := range s.procs().Procs("mcp") {
		if p.PPID == s.Cmd.Process.Pid {
			return p.PID, nil
		}
	}
	return 0, errors.New("conch mcp process not found under /usr/bin/time")
}

// Supervisors lists the supervisor processes of this server's home.
func (s *Server) Supervisors() []Proc { return s.procs().Supervisors() }

// Sessions counts the server's live sessions (Filter.Sessions).
func (s *Server) Sessions() int { return s.procs().Sessions() }

// Close disconnects (conch sees EOF on stdin and exits), kills any
// supervisor left running, keeps the GNU time report and removes the
// temporary directory. It returns how many supervisors were killed.
func (s *Server) Close() int {
	if s.cs != nil {
		s.cs.Close()
		s.cs = nil
	}
	killed := s.procs().KillSupervisors()
	if s.timeFile != "" {
		b, _ := os.ReadFile(s.timeFile)
		s.TimeReport = string(b)
	}
	os.RemoveAll(s.Root)
	return killed
}

// Result is a decoded tool result.
type Result struct {
	Text    string         // the first text content
	D       map[string]any // the structured content (conch's details)
	IsError bool
}

// Str returns a string detail, or "".
func (r Result) Str(k string) string {
	v, _ := r.D[k].(string)
	return v
}

// Num returns a numeric detail, or -1 when it is absent or not a number.
func (r Result) Num(k string) float64 {
	v, ok := r.D[k].(float64)
	if !ok {
		return -1
	}
	return v
}

// Completed checks that r is a successful, finished command.
func (r Result) Completed(what string) error {
	if r.IsError || r.Str("status") != "completed" || r.Num("exitCode") != 0 {
		return fmt.Errorf("%s: status %q exitCode %v isError %v: %s", what, r.Str("status"), r.D["exitCode"], r.IsError, Clip(r.Text, 300))
	}
	return nil
}

// Call invokes a tool, giving up after limit.
func (s *Server) Call(ctx context.Context, limit time.Duration, tool string, args map[string]any) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return Result{}, fmt.Errorf("%s %s: %w", tool, Brief(args), err)
	}
	r := Result{IsError: res.IsError}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			r.Text = tc.Text
			if s.opts.StripNotices {
				r.Text = trimNotices(r.Text)
			}
		}
	}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &r.D)
	}
	if err != nil {
		return r, fmt.Errorf("%s %s: decode details: %w", tool, Brief(args), err)
	}
	return r, nil
}

// RunToEnd runs exec args and, if the command was backgrounded, polls it
// until it ends. It returns the last result and whether the command had
// to be polled.
func (s *Server) RunToEnd(ctx context.Context, limit time.Duration, args map[string]any) (Result, bool, error) {
	deadline := time.Now().Add(limit)
	r, err := s.Call(ctx, limit, "exec", args)
	if err != nil || r.Str("status") != "running" {
		return r, false, err
	}
	id := r.Str("sessionId")
	for r.Str("status") == "running" {
		left := time.Until(deadline)
		if left <= 0 {
			return r, true, fmt.Errorf("exec %s: still running after %v", Brief(args), limit)
		}
		r, err = s.Call(ctx, left+10*time.Second, "process", map[string]any{
			"action": "poll", "sessionId": id, "timeout": min(left.Milliseconds(), 120000),
		})
		if err != nil {
			return r, true, err
		}
		if r.IsError {
			return r, true, fmt.Errorf("poll %s: %s", id, Clip(r.Text, 300))
		}
	}
	return r, true, nil
}

// Brief renders tool arguments for error messages.
func Brief(args map[string]any) string {
	b, _ := json.Marshal(args)
	return Clip(string(b), 160)
}

// Clip shortens s to about n bytes for messages, keeping its head and
// tail.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + " … " + s[len(s)-n/2:]
}

const noticePrefix = "[conch event] "

// StripNotices removes the "[conch event] …" lines conch puts in front of
// a result's text when a background session ended since the last call,
// and the newline after them. Text that does not start with one is
// returned as it is.
func StripNotices(text string) string {
	if !strings.HasPrefix(text, noticePrefix) {
		return text
	}
	return trimNotices(text)
}

// trimNotices removes the leading "[conch event] …" lines of text, then
// one leading newline, whether or not there were any such lines.
func trimNotices(text string) string {
	for strings.HasPrefix(text, noticePrefix) {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			return ""
		}
		text = text[i+1:]
	}
	return strings.TrimPrefix(text, "\n")
}

// Session is the MCP client session, for requests Call does not cover
// (tools/list, the initialize result).
func (s *Server) Session() *mcp.ClientSession { return s.cs }

// ApproxTokens is the token estimate of the agent benchmarks (and of
// conch's tools/list budget test): Unicode characters / 4.
func ApproxTokens(s string) int { return utf8.RuneCountInString(s) / 4 }
