package main

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
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/hostenv"
	"github.com/conchsh/conch/internal/supervisor"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// conchBin is the conch binary built once for the end-to-end tests.
var conchBin string

func TestMain(m *testing.M) {
	// Every process the tests start inherits the run's marker (see
	// otherRun).
	os.Setenv(runMarkerKey, strconv.Itoa(os.Getpid()))
	dir, err := os.MkdirTemp("", "conch-e2e-")
	if err != nil {
		panic(err)
	}
	conchBin = filepath.Join(dir, "conch")
	// conch-shim beside conch, as go install puts it: the engine starts
	// every supervisor and sandbox init with it.
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), ".", "../conch-shim")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build conch:", err)
		os.Exit(1)
	}
	cache := filepath.Join(dir, "login-path.json")
	hostenv.StartLoginProbe(cache).Wait(-1)
	loginCache, _ = os.ReadFile(cache)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// loginCache is the login-shell probe's cache file for this test process's
// environment (HOME, SHELL, PATH), probed once and written into every new
// home: a conch started with that environment takes it instead of probing
// the developer's login shell, whose duration (seconds for a slow profile
// on a busy machine) would otherwise decide whether a first call says it
// ran without the login-shell PATH. Tests of the probe start conch with a
// HOME and SHELL of their own, for which the cached key does not match.
var loginCache []byte

// conch is a `conch mcp` process driven by the official Go SDK client.
type conch struct {
	t    *testing.T
	home string
	cmd  *exec.Cmd
	cs   *mcp.ClientSession

	mu     sync.Mutex
	logs   []*mcp.LoggingMessageParams
	events []string

	// outSchemas are the tools' output schemas: every result of every
	// test is checked against its tool's (outputSchemas in tools_test.go).
	outSchemas map[string]*jsonschema.Resolved
}

// newHome returns a fresh conch home, optionally with a config file.
func newHome(t *testing.T, config string) string {
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
	if loginCache != nil {
		os.Mkdir(filepath.Join(home, "state"), 0o700)
		os.WriteFile(filepath.Join(home, "state", "login-path.json"), loginCache, 0o600)
	}
	t.Cleanup(func() { killLeftovers(t, home) })
	return home
}

// killLeftovers ends any supervisor a failed test left behind, and then
// the commands of the home's sessions: a SIGKILLed supervisor leaves its
// command running in its cgroup (an engine sweeps it at its next start),
// and a leftover `sleep 9xx.1` would break the process counts of later
// runs.
func killLeftovers(t *testing.T, home string) {
	exec.Command("pkill", "-9", "-f", "supervise --home "+home).Run()
	dirs, _ := filepath.Glob(filepath.Join(home, "sessions", "*"))
	for _, dir := range dirs {
		var m supervisor.Meta
		if supervisor.ReadJSON(supervisor.MetaPath(dir), &m) == nil {
			supervisor.Sweep(m)
		}
	}
}

// startConch runs `conch mcp` on home and connects to it.
func startConch(t *testing.T, home string, args ...string) *conch {
	t.Helper()
	return startConchEnv(t, home, nil, args...)
}

// startConchEnv is startConch with extra environment variables (K=V) for
// the conch process.
func startConchEnv(t *testing.T, home string, env []string, args ...string) *conch {
	t.Helper()
	c := &conch{t: t, home: home}
	cmd := exec.Command(conchBin, append([]string{"mcp", "--home", home}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = os.Stderr
	cmd.Dir = t.TempDir()
	c.cmd = cmd
	client := mcp.NewClient(&mcp.Implementation{Name: "conch-e2e", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			c.logs = append(c.logs, req.Params)
			c.mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), slow(30*time.Second))
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to conch mcp: %v", err)
	}
	c.cs = cs
	t.Cleanup(func() { c.close() })
	c.outSchemas = outputSchemas(t, cs)
	return c
}

func (c *conch) close() {
	if c.cs != nil {
		c.cs.Close()
		c.cs = nil
	}
}

// kill9 kills the conch process without any chance to clean up.
func (c *conch) kill9() {
	pid := c.cmd.Process.Pid
	c.cmd.Process.Kill()
	c.cs.Close()
	c.cs = nil
	// The transport's Close does not always wait for the exit.
	deadline := time.Now().Add(slow(10 * time.Second))
	for time.Now().Before(deadline) {
		if isZombie(pid) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("conch mcp (pid %d) did not die on SIGKILL", pid)
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

func (r result) num(k string) float64 {
	v, ok := r.D[k].(float64)
	if !ok {
		return -1
	}
	return v
}

// call invokes a tool with a hard deadline. Inline exec events at the top
// of the text are moved to c.events so that tests compare the result
// itself; rawCall keeps them.
func (c *conch) call(tool string, args map[string]any) result {
	c.t.Helper()
	r := c.rawCall(tool, args)
	for strings.HasPrefix(r.Text, "[conch event] ") {
		line, rest, _ := strings.Cut(r.Text, "\n")
		c.mu.Lock()
		c.events = append(c.events, line)
		c.mu.Unlock()
		r.Text = strings.TrimPrefix(rest, "\n")
	}
	return r
}

func (c *conch) rawCall(tool string, args map[string]any) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), slow(60*time.Second))
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s %v: %v", tool, args, err)
	}
	var r result
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

func (c *conch) exec(args map[string]any) result {
	c.t.Helper()
	return c.call("exec", args)
}

func (c *conch) process(args map[string]any) result {
	c.t.Helper()
	return c.call("process", args)
}

// waitEnd polls a session until it leaves the running state, failing
// after slow(within). It returns the poll that reports the end, read from
// cursor 0 so that its text holds the whole (bounded) output.
func (c *conch) waitEnd(id string, within time.Duration) result {
	c.t.Helper()
	deadline := time.Now().Add(slow(within))
	for {
		// since 0: the result that reports the end holds all the output,
		// also what an earlier poll of this loop already returned (on a
		// loaded machine the output often comes one poll before the end).
		r := c.process(map[string]any{"action": "poll", "sessionId": id, "timeout": 500, "since": 0})
		if st := r.str("status"); st != "running" && st != "pending" {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("session %s still running after %v: %s", id, slow(within), r.Text)
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

// slow scales d, the time a test gives an event on an idle machine, by
// slowFactor. Use it for deadlines that bound a wait for an event, never
// for a duration that is the thing under test (a timeout, a yield).
func slow(d time.Duration) time.Duration {
	return time.Duration(float64(d) * slowFactor)
}

// eventually retries f until it returns "" or slow(d) passes, then fails
// with its last message.
func eventually(t *testing.T, d time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(slow(d))
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

// pgrep lists pids whose command line contains pattern.
// pgrep lists the pids whose command line matches pattern. Anchor it
// (^sleep ...) to count the command itself: with SHELL unset (as in CI)
// the shell is dash, which does not exec the last command, so an
// unanchored pattern also matches "sh -c sleep ...".
func pgrep(pattern string) []string {
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

// pgrepHome is pgrep limited to the commands of one home's sessions: those
// whose session leader is a `conch supervise --home home` (the supervisor
// starts a pipe session's command in its own session). Leftovers of other
// runs on the machine do not count.
func pgrepHome(pattern, home string) []string {
	var out []string
	for _, pid := range pgrep(pattern) {
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

// marker returns a unique string usable in a command line to find its
// processes later (e.g. `sleep 1000 # <marker>` is not visible; use it as
// an argument).
func marker(t *testing.T) string {
	return fmt.Sprintf("conch-e2e-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
}

// supervisorPID reads a session's supervisor pid from its meta.json.
func supervisorPID(t *testing.T, home, id string) int {
	t.Helper()
	// A supervisor host writes meta.json 250 ms after the start, or as
	// soon as it sees its engine go (docs/sessions.md).
	var b []byte
	eventually(t, 5*time.Second, func() string {
		var err error
		if b, err = os.ReadFile(filepath.Join(home, "sessions", id, "meta.json")); err != nil {
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

// isZombie reports whether pid has exited but not been reaped (orphans
// are reaped late by this machine's init).
func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// TestPgrepOtherRun: pgrep counts the processes this run started and
// leaves out those under another test binary or another run's marker.
func TestPgrepOtherRun(t *testing.T) {
	dir := t.TempDir()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	b, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "other.test")
	if err := os.WriteFile(fake, b, 0o755); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("99%d", os.Getpid())
	var unmarked []string // the environment of a run without a marker
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, runMarkerKey+"=") {
			unmarked = append(unmarked, kv)
		}
	}
	start := func(env []string, argv ...string) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	}
	// "; true" keeps the shell from exec'ing sleep: sleep stays its child.
	start(nil, "sh", "-c", "sleep "+tag+".1; true")
	start(unmarked, fake, "-c", "sleep "+tag+".2; true")
	start(append(unmarked, runMarkerKey+"=1"), "sh", "-c", "sleep "+tag+".3; true")
	eventually(t, 10*time.Second, func() string {
		if n := len(pgrep("^sleep " + tag + `\.`)); n != 1 {
			return fmt.Sprintf("%d of this run's sleeps, want 1", n)
		}
		if all, _ := exec.Command("pgrep", "-f", "^sleep "+tag+`\.`).Output(); len(strings.Fields(string(all))) != 3 {
			return fmt.Sprintf("sleeps running: %q", all)
		}
		return ""
	})
	if p := pgrep("^sleep " + tag + `\.1`); len(p) != 1 {
		t.Fatalf("this run's sleep not counted: %v", p)
	}
}
