package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ConchBin is the conch binary built once for the end-to-end tests;
// ShimBin is the conch-shim beside it, which runs every supervisor and
// sandbox init of the conch processes the tests start.
var ConchBin, ShimBin string

// LoginCache is the login-shell probe's cache file for this test process's
// environment (HOME, SHELL, PATH), probed once and written into every new
// home: a conch started with that environment takes it instead of probing
// the developer's login shell, whose duration (seconds for a slow profile
// on a busy machine) would otherwise decide whether a first call says it
// ran without the login-shell PATH. Tests of the probe start conch with a
// HOME and SHELL of their own, for which the cached key does not match.
var LoginCache []byte

// Conch is a `conch mcp` process driven by the official Go SDK client.
type Conch struct {
	t    testing.TB
	Home string
	Cmd  *exec.Cmd
	CS   *mcp.ClientSession
	// Stderr is the conch process's stderr (NewLog).
	Stderr *Log

	Mu     sync.Mutex
	Logs   []*mcp.LoggingMessageParams
	Events []string

	// outSchemas are the tools' output schemas: every result of every
	// test is checked against its tool's (OutputSchemas in tools.go).
	outSchemas map[string]*jsonschema.Resolved
}

// NewHome returns a fresh conch home, optionally with a config file.
func NewHome(t testing.TB, config string) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if LoginCache != nil {
		os.Mkdir(filepath.Join(home, "state"), 0o700)
		os.WriteFile(filepath.Join(home, "state", "login-path.json"), LoginCache, 0o600)
	}
	t.Cleanup(func() { KillLeftovers(t, home) })
	return home
}

// KillLeftovers ends any supervisor a failed test left behind, and then
// the commands of the home's sessions: a SIGKILLed supervisor leaves its
// command running in its cgroup (an engine sweeps it at its next start),
// and a leftover `sleep 9xx.1` would break the process counts of later
// runs.
func KillLeftovers(t testing.TB, home string) {
	exec.Command("pkill", "-9", "-f", "supervise --home "+home).Run()
	dirs, _ := filepath.Glob(filepath.Join(home, "sessions", "*"))
	for _, dir := range dirs {
		var m proto.Meta
		if fsutil.ReadJSON(proto.MetaPath(dir), &m) == nil {
			supervisor.Sweep(m)
		}
	}
}

// StartConch runs `conch mcp` on home and connects to it.
func StartConch(t testing.TB, home string, args ...string) *Conch {
	t.Helper()
	return StartConchEnv(t, home, nil, args...)
}

// StartConchEnv is StartConch with extra environment variables (K=V) for
// the conch process.
func StartConchEnv(t testing.TB, home string, env []string, args ...string) *Conch {
	t.Helper()
	c := &Conch{t: t, Home: home}
	cmd := exec.Command(ConchBin, append([]string{"mcp", "--home", home}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stderr *os.File
	c.Stderr, stderr = NewLog(t, "conch mcp")
	cmd.Stderr = stderr
	cmd.Dir = t.TempDir()
	c.Cmd = cmd
	client := mcp.NewClient(&mcp.Implementation{Name: "conch-e2e", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.Mu.Lock()
			c.Logs = append(c.Logs, req.Params)
			c.Mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), Slow(30*time.Second))
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to conch mcp: %v", err)
	}
	c.CS = cs
	t.Cleanup(func() { c.Close() })
	c.outSchemas = outputSchemas(t, cs)
	return c
}

// Close ends the MCP session, and with it the conch process.
func (c *Conch) Close() {
	if c.CS != nil {
		c.CS.Close()
		c.CS = nil
	}
}

// Kill9 kills the conch process without any chance to clean up.
func (c *Conch) Kill9() {
	pid := c.Cmd.Process.Pid
	c.Cmd.Process.Kill()
	c.CS.Close()
	c.CS = nil
	// The transport's Close does not always wait for the exit.
	deadline := time.Now().Add(Slow(10 * time.Second))
	for time.Now().Before(deadline) {
		if IsZombie(pid) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("conch mcp (pid %d) did not die on SIGKILL", pid)
}

// Result is a decoded tool result.
type Result struct {
	Text    string
	D       map[string]any
	IsError bool
}

// Str is the structured result's string field k ("" if absent).
func (r Result) Str(k string) string {
	v, _ := r.D[k].(string)
	return v
}

// Num is the structured result's number field k (-1 if absent).
func (r Result) Num(k string) float64 {
	v, ok := r.D[k].(float64)
	if !ok {
		return -1
	}
	return v
}

// Call invokes a tool with a hard deadline. Inline exec events at the top
// of the text are moved to c.events so that tests compare the result
// itself; rawCall keeps them.
func (c *Conch) Call(tool string, args map[string]any) Result {
	c.t.Helper()
	r := c.RawCall(tool, args)
	for strings.HasPrefix(r.Text, "[conch event] ") {
		line, rest, _ := strings.Cut(r.Text, "\n")
		c.Mu.Lock()
		c.Events = append(c.Events, line)
		c.Mu.Unlock()
		r.Text = strings.TrimPrefix(rest, "\n")
	}
	return r
}

// RawCall is Call without moving the inline exec events out of the text;
// every result is checked against its tool's output schema.
func (c *Conch) RawCall(tool string, args map[string]any) Result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Slow(60*time.Second))
	defer cancel()
	res, err := c.CS.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s %v: %v", tool, args, err)
	}
	var r Result
	r.IsError = res.IsError
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			r.Text = tc.Text
		}
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &r.D)
	checkOutput(c.t, c.outSchemas, tool, args, b)
	return r
}

// Exec calls the exec tool.
func (c *Conch) Exec(args map[string]any) Result {
	c.t.Helper()
	return c.Call("exec", args)
}

// Process calls the process tool.
func (c *Conch) Process(args map[string]any) Result {
	c.t.Helper()
	return c.Call("process", args)
}

// WaitEnd polls a session until it leaves the running state, failing
// after slow(within). It returns the poll that reports the end, read from
// cursor 0 so that its text holds the whole (bounded) output.
func (c *Conch) WaitEnd(id string, within time.Duration) Result {
	c.t.Helper()
	deadline := time.Now().Add(Slow(within))
	for {
		// since 0: the result that reports the end holds all the output,
		// also what an earlier poll of this loop already returned (on a
		// loaded machine the output often comes one poll before the end).
		r := c.Process(map[string]any{"action": "poll", "sessionId": id, "timeout": 500, "since": 0})
		if st := r.Str("status"); st != "running" && st != "pending" {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("session %s still running after %v: %s", id, Slow(within), r.Text)
		}
	}
}

// slowFactor is how many times longer than on an idle machine a test
// waits for an event before it gives up: CONCH_TEST_SLOW (a number >= 1),
// default 3. A 2-core machine running several test binaries at once
// (load average 15) starts a process or a session many times slower than
// an idle one; the factor only lengthens the wait of a test that is about
// to fail, never the run of one that passes.
var slowFactor = func() float64 {
	if f, err := strconv.ParseFloat(os.Getenv("CONCH_TEST_SLOW"), 64); err == nil && f >= 1 {
		return f
	}
	return 3
}()

// Slow scales d, the time a test gives an event on an idle machine, by
// slowFactor. Use it for deadlines that bound a wait for an event, never
// for a duration that is the thing under test (a timeout, a yield).
func Slow(d time.Duration) time.Duration {
	return time.Duration(float64(d) * slowFactor)
}

// Eventually retries f until it returns "" or slow(d) passes, then fails
// with its last message.
func Eventually(t testing.TB, d time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(Slow(d))
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pgrep lists pids whose command line contains pattern.
// pgrep lists the pids whose command line matches pattern. Anchor it
// (^sleep ...) to count the command itself: with SHELL unset (as in CI)
// the shell is dash, which does not exec the last command, so an
// unanchored pattern also matches "sh -c sleep ...".
func Pgrep(pattern string) []string {
	out, _ := exec.Command("pgrep", "-f", pattern).Output()
	var pids []string
	for _, pid := range strings.Fields(string(out)) {
		if startedAfter(pid, runStart) && !otherRun(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// runMarkerKey names the environment variable, set to the test binary's
// pid, that every process of this run inherits: the conch processes the
// tests start have it, and so do their supervisors' parents.
const runMarkerKey = "CONCHTEST_RUN"

// otherRun reports whether pid belongs to another test binary running at
// the same time on this machine (developers and CI helpers run the
// package concurrently, and the tests name their commands with fixed
// tags such as "sleep 950.1"): walking up from pid, an ancestor that is
// another Go test binary (its name ends in ".test"), or whose environment
// has another runMarkerKey, comes before this test binary. A process with
// neither (a supervisor whose engine has exited, reparented to init)
// counts as this run's, so a leftover check is never weakened.
func otherRun(pid string) bool {
	self := strconv.Itoa(os.Getpid())
	mine := runMarkerKey + "=" + self
	for i := 0; i < 64 && pid != "" && pid != "0" && pid != "1"; i++ {
		if pid == self {
			return false
		}
		comm, ppid := procParent(pid)
		if strings.HasSuffix(comm, ".test") {
			return true
		}
		if env, err := os.ReadFile("/proc/" + pid + "/environ"); err == nil {
			for _, kv := range strings.Split(string(env), "\x00") {
				if strings.HasPrefix(kv, runMarkerKey+"=") {
					return kv != mine
				}
			}
		}
		pid = ppid
	}
	return false
}

// procParent reads the command name and the parent of pid from /proc
// ("" if pid is gone).
func procParent(pid string) (comm, ppid string) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", ""
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndex(s, ") ")
	if open < 0 || end < open {
		return "", ""
	}
	f := strings.Fields(s[end+2:])
	if len(f) < 2 {
		return "", ""
	}
	return s[open+1 : end], f[1]
}

// runStart is when this test binary started, in clock ticks since boot
// (the unit of /proc/<pid>/stat's starttime). Processes started before it
// belong to earlier runs (a failed run on a developer machine) and are not
// this run's leftovers.
var runStart = procStart(strconv.Itoa(os.Getpid()))

func procStart(pid string) uint64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64) // field 22, starttime
	return n
}

// startedAfter reports whether pid started at or after ticks; a process
// whose start cannot be read counts as new.
func startedAfter(pid string, ticks uint64) bool {
	st := procStart(pid)
	return st == 0 || st >= ticks
}

// PgrepHome is pgrep limited to the commands of one home's sessions: those
// whose session leader is a `conch supervise --home home` (the supervisor
// starts a pipe session's command in its own session). Leftovers of other
// runs on the machine do not count.
func PgrepHome(pattern, home string) []string {
	var out []string
	for _, pid := range Pgrep(pattern) {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 4 {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + f[3] + "/cmdline")
		if strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), "supervise --home "+home) {
			out = append(out, pid)
		}
	}
	return out
}

// Marker returns a unique string usable in a command line to find its
// processes later (e.g. `sleep 1000 # <marker>` is not visible; use it as
// an argument).
func Marker(t testing.TB) string {
	return fmt.Sprintf("conch-e2e-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
}

// SupervisorPID reads a session's supervisor pid from its meta.json.
func SupervisorPID(t testing.TB, home, id string) int {
	t.Helper()
	// A shared supervisor writes meta.json 250 ms after the start, or as
	// soon as it sees its engine go (docs/sessions.md).
	var b []byte
	Eventually(t, 5*time.Second, func() string {
		var err error
		if b, err = os.ReadFile(proto.MetaPath(proto.SessionDir(home, id))); err != nil {
			return err.Error()
		}
		return ""
	})
	var m struct {
		SupervisorPID int `json:"supervisorPid"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.SupervisorPID == 0 {
		t.Fatalf("meta.json: %v %s", err, b)
	}
	return m.SupervisorPID
}

// IsZombie reports whether pid has exited but not been reaped (orphans
// are reaped late by this machine's init).
func IsZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}
