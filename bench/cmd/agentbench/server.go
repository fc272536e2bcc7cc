package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// server is one `conch mcp` process on a fresh temporary home, driven
// through the official Go SDK client over stdio (as in conchbench).
type server struct {
	bin  string // absolute path of the conch binary
	root string // temporary directory holding home and work
	home string
	work string
	cmd  *exec.Cmd
	cs   *mcp.ClientSession
}

// startServer starts `bin mcp --home <fresh home>` with config as the
// home's config.json and connects to it.
func startServer(ctx context.Context, bin, config string) (*server, error) {
	root, err := os.MkdirTemp("", "agentbench-")
	if err != nil {
		return nil, err
	}
	// Supervisors carry the absolute, symlink-free home in their argv;
	// matching them in /proc needs the same spelling.
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	s := &server{bin: bin, root: root, home: filepath.Join(root, "home"), work: filepath.Join(root, "work")}
	for _, d := range []string{s.home, s.work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(s.home, "config.json"), []byte(config+"\n"), 0o600); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	s.cmd = exec.Command(bin, "mcp", "--home", s.home, "--workdir", s.work)
	s.cmd.Dir = s.work
	s.cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "agentbench", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s.cs, err = client.Connect(cctx, &mcp.CommandTransport{Command: s.cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("connect to conch mcp: %w", err)
	}
	return s, nil
}

// close disconnects (conch sees EOF on stdin and exits), kills any
// supervisor of this home left running and removes the temporary
// directory. It returns how many supervisors were killed.
func (s *server) close() int {
	if s.cs != nil {
		s.cs.Close()
		s.cs = nil
	}
	killed := killSupervisors(s.bin, s.home)
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

// call invokes a tool, giving up after limit. Inline "[conch event]"
// lines at the top of the text are removed.
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
			r.Text = stripNotices(tc.Text)
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

// waitEnd polls a background session until it is no longer running.
func (s *server) waitEnd(ctx context.Context, id string, limit time.Duration) (result, error) {
	deadline := time.Now().Add(limit)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return result{}, fmt.Errorf("session %s still running after %v", id, limit)
		}
		r, err := s.call(ctx, left+10*time.Second, "process", map[string]any{
			"action": "poll", "sessionId": id, "timeout": min(left.Milliseconds(), 120000),
		})
		if err != nil {
			return r, err
		}
		if r.IsError {
			return r, fmt.Errorf("poll %s: %s", id, clip(r.Text, 300))
		}
		if st := r.str("status"); st != "running" && st != "pending" {
			return r, nil
		}
	}
}

// stripNotices removes the "[conch event] …" lines conch puts in front of
// a result's text when a background session ended since the last call.
func stripNotices(text string) string {
	for strings.HasPrefix(text, "[conch event] ") {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			return ""
		}
		text = text[i+1:]
	}
	return strings.TrimPrefix(text, "\n")
}

func brief(args map[string]any) string {
	b, _ := json.Marshal(args)
	return clip(string(b), 160)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + " … " + s[len(s)-n/2:]
}

// pid returns the pid of the conch mcp process.
func (s *server) pid() int { return s.cmd.Process.Pid }

// proc is one process seen in /proc.
type proc struct {
	pid, ppid int
	argv      []string
}

func (p proc) flagValue(name string) string {
	for i := 0; i+1 < len(p.argv); i++ {
		if p.argv[i] == name {
			return p.argv[i+1]
		}
	}
	return ""
}

// processes lists the processes visible in /proc.
func processes() []proc {
	ents, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		out = append(out, proc{pid: pid, ppid: ppid, argv: argv})
	}
	return out
}

// killSupervisors ends every supervisor of home left running, with the
// process groups of the commands they supervise (by pid).
func killSupervisors(bin, home string) int {
	var sups []proc
	for _, p := range processes() {
		if len(p.argv) >= 2 && p.argv[0] == bin && p.argv[1] == "supervise" && p.flagValue("--home") == home {
			sups = append(sups, p)
		}
	}
	if len(sups) == 0 {
		return 0
	}
	isSup := map[int]bool{}
	for _, s := range sups {
		isSup[s.pid] = true
	}
	for _, p := range processes() {
		if isSup[p.ppid] {
			syscall.Kill(-p.pid, syscall.SIGKILL)
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	for _, s := range sups {
		syscall.Kill(s.pid, syscall.SIGKILL)
	}
	return len(sups)
}

// statusKB reads a "Name:   N kB" field of /proc/<pid>/status.
func statusKB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if ok && name == field {
			v := strings.Fields(rest)
			if len(v) == 0 {
				break
			}
			return strconv.ParseInt(v[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}
