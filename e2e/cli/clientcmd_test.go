package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/creack/pty"
)

func TestCLIExecInProcess(t *testing.T) {
	home := e2etest.NewHome(t, "")
	for _, c := range []struct {
		name   string
		args   []string
		stdout string
		stderr string // substring
		code   int
	}{
		{"echo", []string{"--", "echo", "hi"}, "hi\n", "", 0},
		{"exit code", []string{"--", "sh", "-c", "exit 3"}, "", "", 3},
		{"quoted args", []string{"printf", "%s|", "a b", "it's", ""}, "a b|it's||\n", "", 0},
		{"signal", []string{"--", "echo before; kill -KILL $$"}, "before\n", "Command aborted by signal SIGKILL", 128 + 9},
		{"not found", []string{"--", "no-such-command-conch"}, "*", "Command not found", 127},
		{"timeout", []string{"-t", "0.2", "--", "sleep 5"}, "", "Command timed out after 0.2 seconds", 124},
		{"followed", []string{"--yield", "20", "--", "echo a; sleep 0.3; echo b >&2; exit 4"}, "a\nb\n", "", 4},
		// The timeout leaves the shell time to print first, even on a
		// loaded machine: the test is that the follow shows what came
		// before the timeout, then the timeout.
		{"followed timeout", []string{"--yield", "20", "-t", "2", "--", "echo a; sleep 30"}, "a\n", "timed out", 124},
		{"no command", nil, "", "no command", 125},
		{"bad flag", []string{"--no-such-flag", "--", "true"}, "", "unknown flag: --no-such-flag", 125},
		{"invalid argument", []string{"--host", "moon", "--", "true"}, "", "Invalid host", 125},
		{"timeout clamped", []string{"-t", "-1", "--", "true"}, "", `Warning: timeout -1 is outside [0, 31536000]; used 0 seconds.`, 0},
		{"timeout overflows", []string{"-t", "1e300", "--", "true"}, "", `Invalid parameter "timeout": expected a number (values outside [0, 31536000] are clamped to it), got 1e+300.`, 125},
		{"yield not finite", []string{"--yield", "NaN", "--", "true"}, "", "not a finite number", 125},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := e2etest.RunCLI(t, nil, append([]string{"exec", "--home", home}, c.args...)...)
			if out != c.stdout && c.stdout != "*" || code != c.code || !strings.Contains(errOut, c.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, c.code, c.stdout, c.stderr)
			}
		})
	}
}

func TestCLIExecJSON(t *testing.T) {
	home := e2etest.NewHome(t, "")
	out, _, code := e2etest.RunCLI(t, nil, "exec", "--home", home, "--json", "--", "echo", "hi")
	var r struct {
		Text    string
		Details map[string]any
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || r.Text != "hi" || r.Details["status"] != "completed" || r.Details["exitCode"] != 0.0 {
		t.Fatalf("exit %d: %s (%v)", code, out, err)
	}
	// A followed run prints the running result, then the final poll. The
	// run waits for a file that the test creates only after it has read
	// the running result: the 20 ms yield always ends first, however slow
	// the machine, and the final poll always has output after its cursor.
	gate := filepath.Join(t.TempDir(), "gate")
	ctx, cancel := context.WithTimeout(context.Background(), e2etest.Slow(60*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, e2etest.ConchBin, "exec", "--home", home, "--json", "--yield", "20", "--",
		"echo alpha-out; while [ ! -e "+gate+" ]; do sleep 0.02; done; echo beta-out; exit 2")
	cmd.Env = e2etest.CLIEnv("CONCH_HOME=" + filepath.Join(t.TempDir(), "default-home"))
	cmd.Dir = t.TempDir()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdout)
	first, err := rd.ReadString('\n')
	if err != nil {
		cmd.Wait()
		t.Fatalf("no running result: %q %v", first, err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(rd)
	err = cmd.Wait()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("conch exec --json: %v", err)
	}
	out = first + string(rest)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var running, final struct {
		Text    string
		Details map[string]any
	}
	if code != 2 || len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &running) != nil || json.Unmarshal([]byte(lines[1]), &final) != nil ||
		running.Details["status"] != "running" || final.Details["exitCode"] != 2.0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// The output is split at the running result's cursor: the final
	// result carries exactly what follows it (whether the 20 ms yield
	// ended before or after the first line is up to the machine).
	const output = "alpha-out\nbeta-out\n"
	c, _ := running.Details["cursor"].(float64)
	if c < 0 || int(c) > len("alpha-out\n") || final.Details["cursor"] != float64(len(output)) ||
		!strings.HasPrefix(final.Text, output[int(c):len(output)-1]+"\n\n") ||
		c > 0 && running.Details["tail"] != "alpha-out" {
		t.Fatalf("output split between the results:\n%s", out)
	}
}

func TestCLISessions(t *testing.T) {
	home := e2etest.NewHome(t, "")
	h := []string{"--home", home}
	// cli puts --home right after the command name: flags after "--"
	// would belong to the command.
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return e2etest.RunCLI(t, nil, append(append([]string{args[0]}, h...), args[1:]...)...)
	}
	out, _, code := cli("exec", "-b", "--", "sleep", "5")
	id := strings.TrimSpace(out)
	if code != 0 || id == "" || strings.ContainsAny(id, " \n") {
		t.Fatalf("exec -b: exit %d, %q", code, out)
	}
	out, _, code = cli("ps")
	if code != 0 || !psRow(out, "", id, "running") {
		t.Fatalf("ps: exit %d\n%s", code, out)
	}
	out, _, code = cli("ps", "--all-agents")
	if code != 0 || !psRow(out, "main", id, "running") {
		t.Fatalf("ps --all-agents: exit %d\n%s", code, out)
	}
	out, _, code = cli("kill", id)
	if code != 0 || !strings.Contains(out, "Killed session "+id) {
		t.Fatalf("kill: exit %d\n%s", code, out)
	}
	out, _, code = cli("poll", id, "--json")
	if code != 0 || !strings.Contains(out, `"state":"killed"`) {
		t.Fatalf("poll: exit %d\n%s", code, out)
	}
	if out, _, code = cli("rm", id); code != 0 || !strings.Contains(out, "Removed session "+id) {
		t.Fatalf("rm: exit %d\n%s", code, out)
	}
	if _, errOut, code := cli("poll", id); code != e2etest.ExitNotFound || !strings.Contains(errOut, "No session found for "+id) {
		t.Fatalf("poll after rm: exit %d\n%s", code, errOut)
	}
	if _, _, code := cli("kill"); code != e2etest.ExitUsage {
		t.Fatalf("kill without id: exit %d", code)
	}

	// Input, then follow the log to the end.
	out, _, _ = cli("exec", "-b", "--", "read x; echo got:$x; sleep 0.2; echo done")
	id = strings.TrimSpace(out)
	if out, errOut, code := cli("send", id, "--data", "hello", "--submit"); code != 0 || !strings.Contains(out, "Wrote 5 bytes") || !strings.Contains(out, "Submitted session") {
		t.Fatalf("send: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := cli("log", id, "-f"); code != 0 || out != "got:hello\ndone\n" {
		t.Fatalf("log -f: exit %d, %q %s", code, out, errOut)
	}
	if out, _, code := cli("log", id, "--offset", "1"); code != 0 || out != "done\n" {
		t.Fatalf("log --offset 1: exit %d, %q", code, out)
	}
	if out, _, code := cli("clear", id); code != 0 || !strings.Contains(out, "Cleared session") {
		t.Fatalf("clear: exit %d, %q", code, out)
	}

	// Actions the engine may not offer yet answer "unavailable" (exit 6).
	out, _, _ = cli("exec", "-b", "--", "echo needle")
	id = strings.TrimSpace(out)
	for _, args := range [][]string{{"search", id, "needle"}, {"screen", id}, {"wait", id, "--timeout", "5000"}} {
		out, errOut, code := cli(args...)
		if code == e2etest.ExitUnavailable && strings.Contains(errOut, "not available") {
			continue
		}
		if args[0] == "screen" && code == e2etest.ExitConflict {
			continue // not a PTY session
		}
		if code != 0 {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}

func TestCLIApprovals(t *testing.T) {
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"always"`, "")
	out, errOut, code := e2etest.RunCLI(t, nil, "exec", "--home", home, "--no-wait", "--", "echo", "later")
	if code != e2etest.ExitNoWait || strings.TrimSpace(out) == "" || !strings.Contains(errOut, "Approval required") {
		t.Fatalf("--no-wait: exit %d, %q %q", code, out, errOut)
	}
	// No gateway serves the home: the request dies with this command's
	// own engine, and it says so rather than how to decide it
	// (TestNoWaitWithGateway: with one, how to go on from a shell).
	if !strings.Contains(errOut, "No gateway serves this home") || strings.Contains(errOut, "Decide:") {
		t.Errorf("--no-wait without a gateway does not say the request is dropped:\n%s", errOut)
	}

	// decide finds the approval of command and decides it.
	decide := func(command, how string) {
		t.Helper()
		e2etest.Eventually(t, 20*time.Second, func() string {
			out, _, _ := e2etest.RunCLI(t, nil, "approvals", "pending", "--json", "--home", home)
			var list []struct{ Slug, Command string }
			json.Unmarshal([]byte(out), &list)
			for _, a := range list {
				if a.Command == command {
					if o, _, code := e2etest.RunCLI(t, nil, "approvals", how, a.Slug, "--home", home); code != 0 {
						return "decide: " + o
					}
					return ""
				}
			}
			return "no pending approval for " + command + ": " + out
		})
	}
	for _, c := range []struct {
		command, how, stdout string
		code                 int
	}{
		{"echo approved", "approve", "approved\n", 0},
		{"echo refused", "deny", "", e2etest.ExitDenied},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, e2etest.ConchBin, "exec", "--home", home, "--", c.command)
		cmd.Env = e2etest.CLIEnv()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		decide(c.command, c.how)
		cmd.Wait()
		cancel()
		if code := cmd.ProcessState.ExitCode(); code != c.code || out.String() != c.stdout {
			t.Fatalf("%s: exit %d, %q\n%s", c.command, code, out.String(), errb.String())
		}
	}
}

// fakeGateway mimics the answers of `conch serve` for the client paths.
type fakeGateway struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string // "METHOD path auth agent"
	streamed chan struct{}
}

func newFakeGateway(t *testing.T) *fakeGateway {
	f := &fakeGateway{streamed: make(chan struct{}, 10)}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeGateway) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func (f *fakeGateway) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, fmt.Sprintf("%s %s %s %s", r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("X-Conch-Agent")))
	f.mu.Unlock()
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	switch r.Method + " " + r.URL.Path {
	case "POST /v1/exec":
		switch body["command"] {
		case "echo hi":
			reply(200, map[string]any{"text": "hi", "details": map[string]any{"status": "completed", "state": "exited", "exitCode": 0, "aggregated": "hi"}})
		case "denied":
			e := map[string]string{"code": "denied", "message": "exec denied: allowlist miss"}
			reply(403, map[string]any{"error": e, "text": e["message"], "details": map[string]any{"status": "error", "error": e}})
		case "long", "slow", "forever":
			reply(200, map[string]any{"text": "Command still running", "details": map[string]any{"status": "running", "sessionId": body["command"], "cursor": 0}})
		default:
			reply(400, map[string]any{"error": map[string]string{"code": "invalid_argument", "message": "unexpected command"}})
		}
	case "POST /v1/process":
		if body["action"] != "poll" || body["sessionId"] != "slow" {
			e := map[string]string{"code": "not_found", "message": fmt.Sprintf("No session found for %v", body["sessionId"])}
			reply(404, map[string]any{"error": e, "text": e["message"], "details": map[string]any{"status": "failed", "error": e}})
			return
		}
		// The end state of "slow", which the stream's end event lacks.
		reply(200, map[string]any{"text": "(no new output)", "details": map[string]any{"status": "failed", "state": "killed", "killedBy": "timeout", "signal": "SIGTERM", "reason": "Command timed out after 1 seconds."}})
	case "GET /v1/sessions/long/stream":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 2\nevent: output\ndata: {\"cursor\":2,\"stream\":\"both\",\"text\":\"a\"}\n\n")
		fmt.Fprint(w, "id: 4\nevent: output\ndata: {\"cursor\":4,\"stream\":\"both\",\"text\":\"b\"}\n\n")
		fmt.Fprint(w, "event: end\ndata: {\"state\":\"exited\",\"exitCode\":5,\"signal\":null}\n\n")
	case "GET /v1/sessions/slow/stream":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: end\ndata: {\"state\":\"killed\",\"exitCode\":null,\"signal\":\"SIGTERM\"}\n\n")
	case "GET /v1/sessions/forever/stream":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 6\nevent: output\ndata: {\"cursor\":6,\"stream\":\"both\",\"text\":\"ready\"}\n\n")
		w.(http.Flusher).Flush()
		f.streamed <- struct{}{}
		<-r.Context().Done()
	case "GET /v1/sessions":
		reply(200, map[string]any{"text": "calm-gulf running   2s :: sleep 5", "details": map[string]any{"status": "completed", "sessions": []any{
			map[string]any{"sessionId": "calm-gulf", "status": "running", "runtimeMs": 2000, "command": "sleep 5", "name": "sleep 5"}}}})
	default:
		reply(404, map[string]any{"error": map[string]string{"code": "not_found", "message": "no route for " + r.Method + " " + r.URL.Path}})
	}
}

func TestCLIGateway(t *testing.T) {
	gw := newFakeGateway(t)
	home := e2etest.NewHome(t, "")
	if err := os.WriteFile(filepath.Join(home, "operator.token"), []byte("cop_operator\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := []string{"--home", home, "--gateway", gw.URL}
	for _, c := range []struct {
		name           string
		env, args      []string
		stdout, stderr string
		code           int
		request        string
	}{
		{"operator token", nil, []string{"exec", "--", "echo hi"}, "hi\n", "", 0, "POST /v1/exec Bearer cop_operator main"},
		{"token flag and agent", nil, []string{"exec", "--token", "cat_x", "--agent", "build", "--", "echo hi"}, "hi\n", "", 0, "POST /v1/exec Bearer cat_x build"},
		{"token env", []string{"CONCH_TOKEN=cat_env", "CONCH_AGENT=ci"}, []string{"exec", "--", "echo hi"}, "hi\n", "", 0, "POST /v1/exec Bearer cat_env ci"},
		{"denied", nil, []string{"exec", "--", "denied"}, "", "exec denied: allowlist miss", e2etest.ExitDenied, "POST /v1/exec Bearer cop_operator main"},
		// The follow ends with a poll: the end state and any output lost.
		{"followed", nil, []string{"exec", "--", "long"}, "a\nb\n", "", 5, "POST /v1/process Bearer cop_operator main"},
		{"killed by timeout", nil, []string{"exec", "--", "slow"}, "", "timed out", e2etest.ExitTimeout, "POST /v1/process Bearer cop_operator main"},
		{"detach", nil, []string{"exec", "-d", "--", "long"}, "long\n", "detached; session long keeps running", 0, "POST /v1/exec Bearer cop_operator main"},
		{"ps", nil, []string{"ps"}, "SESSION   STATUS    TIME NAME\ncalm-gulf running   2s   sleep 5\n", "", 0, "GET /v1/sessions Bearer cop_operator main"},
		{"not found", nil, []string{"kill", "nope"}, "", "No session found for nope", e2etest.ExitNotFound, "POST /v1/process Bearer cop_operator main"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := len(gw.log())
			out, errOut, code := e2etest.RunCLI(t, c.env, append(c.args[:1:1], append(g, c.args[1:]...)...)...)
			if out != c.stdout || code != c.code || !strings.Contains(errOut, c.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, c.code, c.stdout, c.stderr)
			}
			reqs := gw.log()[n:]
			if len(reqs) == 0 || reqs[len(reqs)-1] != c.request {
				t.Fatalf("requests %q, want last %q", reqs, c.request)
			}
		})
	}
	// Without a gateway the connection error is a conch error.
	_, errOut, code := e2etest.RunCLI(t, nil, "exec", "--home", home, "--gateway", "http://127.0.0.1:1", "--", "true")
	if code != e2etest.ExitConchError || !strings.Contains(errOut, "conch exec:") {
		t.Fatalf("unreachable gateway: exit %d, %s", code, errOut)
	}
	if _, _, code := e2etest.RunCLI(t, nil, "ps", "--home", home, "--gateway", "http://127.0.0.1:1"); code != e2etest.ExitUnavailable {
		t.Fatalf("ps with an unreachable gateway: exit %d", code)
	}
}

func TestCLIInterruptDetaches(t *testing.T) {
	gw := newFakeGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2etest.ConchBin, "exec", "--home", e2etest.NewHome(t, ""), "--gateway", gw.URL, "--", "forever")
	cmd.Env = e2etest.CLIEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	<-gw.streamed
	cmd.Process.Signal(syscall.SIGINT)
	go io.Copy(io.Discard, stdout)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(errb.String(), "detached; session forever keeps running") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

func TestCLISocket(t *testing.T) {
	home := e2etest.NewHome(t, "")
	if err := os.MkdirAll(filepath.Join(home, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(home, "run", "engine.sock"))
	if err != nil {
		t.Skipf("unix socket: %v", err)
	}
	gw := &fakeGateway{}
	srv := &http.Server{Handler: http.HandlerFunc(gw.serve)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	out, errOut, code := e2etest.RunCLI(t, nil, "ps", "--home", home, "--agent", "build")
	if code != 0 || !strings.Contains(out, "calm-gulf") {
		t.Fatalf("ps over the socket: exit %d, %q %q", code, out, errOut)
	}
	if reqs := gw.log(); len(reqs) != 1 || reqs[0] != "GET /v1/sessions  build" {
		t.Fatalf("requests %q", reqs)
	}
}

// TestCLIRealGateway runs the client commands against `conch serve`:
// through the engine socket and through the HTTP listener.
func TestCLIRealGateway(t *testing.T) {
	for _, k := range []string{"CONCH_GATEWAY", "CONCH_TOKEN", "CONCH_AGENT"} {
		t.Setenv(k, "")
	}
	home := e2etest.NewHome(t, "")
	g := e2etest.StartGateway(t, home)
	out, errOut, code := e2etest.RunCLI(t, nil, "exec", "--home", home, "--yield", "20", "--", "echo a; sleep 0.3; echo b; exit 6")
	if code != 6 || out != "a\nb\n" {
		t.Fatalf("exec over the socket: exit %d, %q %q", code, out, errOut)
	}
	out, errOut, code = e2etest.RunCLI(t, nil, "exec", "--home", home, "--gateway", g.Base, "-b", "--", "sleep", "5")
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("exec over HTTP: exit %d, %q %q", code, out, errOut)
	}
	if out, _, code := e2etest.RunCLI(t, nil, "ps", "--home", home); code != 0 || !psRow(out, "", id, "running") {
		t.Fatalf("ps: exit %d\n%s", code, out)
	}
	if out, _, code := e2etest.RunCLI(t, nil, "kill", id, "--home", home, "--gateway", g.Base); code != 0 || !strings.Contains(out, "Killed session "+id) {
		t.Fatalf("kill: exit %d\n%s", code, out)
	}
	// Agents are managed through the gateway.
	agents := func(args ...string) (string, string, int) {
		return e2etest.RunCLI(t, nil, append([]string{"agents"}, args...)...)
	}
	if out, errOut, code := agents("add", "build", "--home", home, "--workspace", t.TempDir()); code != 0 || !strings.HasPrefix(out, "cat_") {
		t.Fatalf("agents add: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := agents("list", "--home", home, "--gateway", g.Base, "--token", g.Operator); code != 0 || !strings.Contains(out, "build ") {
		t.Fatalf("agents list: exit %d, %q %q", code, out, errOut)
	}
	if _, _, code := agents("add", "build", "--home", home); code != e2etest.ExitConflict {
		t.Fatalf("agents add twice: exit %d", code)
	}
	if _, _, code := agents("token", "build", "--home", home); code != e2etest.ExitUsage {
		t.Fatalf("agents token without --rotate: exit %d", code)
	}
	if out, _, code := agents("token", "build", "--rotate", "--home", home); code != 0 || !strings.HasPrefix(out, "cat_") {
		t.Fatalf("agents token --rotate: exit %d, %q", code, out)
	}
	if _, errOut, code := agents("remove", "build", "--home", home); code != 0 {
		t.Fatalf("agents remove: exit %d, %q", code, errOut)
	}
	if _, _, code := agents("remove", "build", "--home", home); code != e2etest.ExitNotFound {
		t.Fatalf("agents remove twice: exit %d", code)
	}
}

func TestAgentsClientWithoutGateway(t *testing.T) {
	_, stderr, code := e2etest.RunCLI(t, nil, "agents", "list", "--home", e2etest.NewHome(t, ""))
	if code != e2etest.ExitUnavailable || stderr != "conch agents: no gateway running (start conch serve)\n" {
		t.Fatalf("exit %d, %q", code, stderr)
	}
}

// TestCLIApprovalPromptOnTTY answers the approval question of an
// in-process run on its terminal.
func TestCLIApprovalPromptOnTTY(t *testing.T) {
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"always"`, "")
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2etest.ConchBin, "exec", "--home", home, "--", "echo via-tty")
	cmd.Env = e2etest.CLIEnv()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var seen strings.Builder
	buf := make([]byte, 4096)
	answeredAt := -1 // length of the terminal output when answered
	for answeredAt < 0 || !strings.Contains(seen.String()[answeredAt:], "via-tty") {
		n, err := master.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("read terminal: %v\n%s", err, seen.String())
		}
		if answeredAt < 0 && strings.Contains(seen.String(), "Allow once [o], always [a], deny [d]? ") {
			master.Write([]byte("o\n"))
			answeredAt = seen.Len()
		}
	}
	go io.Copy(io.Discard, master)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d\n%s", code, seen.String())
	}
}

func TestCLIWhileInProcessCLIHoldsTheHome(t *testing.T) {
	home := e2etest.NewHome(t, "")
	// The run lasts until the test creates the file "go", so the first CLI
	// holds the home for as long as the test needs, however slow the machine.
	gate := filepath.Join(t.TempDir(), "go")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) })
	follower := exec.Command(e2etest.ConchBin, "exec", "--home", home, "--", "echo started; while [ ! -e "+gate+" ]; do sleep 0.05; done; echo finished")
	var out strings.Builder
	follower.Stdout = &out
	if err := follower.Start(); err != nil {
		t.Fatal(err)
	}
	// While the first CLI follows its run in-process, a second one gets
	// through its engine socket instead of waiting for the lock.
	e2etest.Eventually(t, 5*time.Second, func() string {
		if _, err := os.Stat(filepath.Join(home, "run", "engine.sock")); err != nil {
			return "the first CLI has not taken the home yet"
		}
		return ""
	})
	done := make(chan error, 1)
	go func() { done <- follower.Wait() }()
	b, err := exec.Command(e2etest.ConchBin, "ps", "--home", home, "--all-agents").CombinedOutput()
	if err != nil {
		t.Fatalf("ps beside an in-process CLI: %v: %s", err, b)
	}
	select {
	case <-done:
		t.Fatal("ps only got through after the first CLI let go of the home")
	default:
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || !strings.Contains(out.String(), "finished") {
		t.Fatalf("follower: %v %q", err, out.String())
	}
}

// TestCLIOutlivesTheEngineItGotThrough: a CLI command that got through
// another CLI command's in-process engine (its engine socket) keeps
// working when that command exits and takes its engine with it: it starts
// an engine of its own (or reaches whichever engine serves the home now)
// and carries on, losing and repeating no output. Generated over the
// commands that follow a session (exec, log -f, wait).
func TestCLIOutlivesTheEngineItGotThrough(t *testing.T) {
	for _, follow := range []string{"exec", "log", "wait"} {
		t.Run(follow, func(t *testing.T) {
			home := e2etest.NewHome(t, "")
			dir := t.TempDir()
			gateA, gateB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			t.Cleanup(func() { os.WriteFile(gateA, nil, 0o600); os.WriteFile(gateB, nil, 0o600) })
			holder := exec.Command(e2etest.ConchBin, "exec", "--home", home, "--", "while [ ! -e "+gateA+" ]; do sleep 0.05; done")
			holder.Env = e2etest.CLIEnv()
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			holderDone := make(chan error, 1)
			go func() { holderDone <- holder.Wait() }()
			e2etest.Eventually(t, 10*time.Second, func() string {
				if !socketServes(filepath.Join(home, "run", "engine.sock")) {
					return "the first CLI does not serve the engine socket yet"
				}
				return ""
			})
			script := "echo B-started; while [ ! -e " + gateB + " ]; do sleep 0.05; done; echo B-finished; exit 3"
			var args []string
			if follow == "exec" {
				args = []string{"exec", "--home", home, "--", script}
			} else {
				out, errOut, code := e2etest.RunCLI(t, nil, "exec", "--home", home, "--background", "--json", "--", script)
				if code != 0 {
					t.Fatalf("background exec: %d %s %s", code, out, errOut)
				}
				var r struct {
					Details struct{ SessionID string } `json:"details"`
				}
				if err := json.Unmarshal([]byte(out), &r); err != nil || r.Details.SessionID == "" {
					t.Fatalf("background exec: %v %q", err, out)
				}
				if follow == "log" {
					args = []string{"log", "--home", home, "-f", r.Details.SessionID}
				} else {
					args = []string{"wait", "--home", home, r.Details.SessionID}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), e2etest.Slow(90*time.Second))
			defer cancel()
			b := exec.CommandContext(ctx, e2etest.ConchBin, args...)
			b.Env = e2etest.CLIEnv()
			var bout, berr e2etest.LockedBuffer
			b.Stdout, b.Stderr = &bout, &berr
			if err := b.Start(); err != nil {
				t.Fatal(err)
			}
			bDone := make(chan error, 1)
			go func() { bDone <- b.Wait() }()
			if follow != "wait" {
				e2etest.Eventually(t, 20*time.Second, func() string {
					if !strings.Contains(bout.String(), "B-started") {
						return "the second CLI has not printed its run's first line: " + berr.String()
					}
					return ""
				})
			}
			// The first CLI exits, and its engine with it.
			os.WriteFile(gateA, nil, 0o600)
			select {
			case err := <-holderDone:
				if err != nil {
					t.Fatalf("first CLI: %v", err)
				}
			case <-time.After(e2etest.Slow(30 * time.Second)):
				t.Fatal("the first CLI does not exit")
			}
			os.WriteFile(gateB, nil, 0o600)
			var err error
			select {
			case err = <-bDone:
			case <-time.After(e2etest.Slow(60 * time.Second)):
				t.Fatalf("the second CLI does not finish; stderr %q", berr.String())
			}
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			out := bout.String()
			switch follow {
			case "exec":
				if code != 3 || strings.Count(out, "B-started") != 1 || strings.Count(out, "B-finished") != 1 {
					t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, berr.String())
				}
			case "log":
				if code != 0 || strings.Count(out, "B-started") != 1 || strings.Count(out, "B-finished") != 1 {
					t.Fatalf("log -f: exit %d, stdout %q, stderr %q", code, out, berr.String())
				}
			case "wait":
				if code != 3 || !strings.Contains(out, "exited with code 3") {
					t.Fatalf("wait: exit %d, stdout %q, stderr %q", code, out, berr.String())
				}
			}
		})
	}
}

// socketServes reports whether something accepts connections on path.
func socketServes(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// TestMCPOutlivesTheEngineItProxiesTo: a `conch mcp` started on a held
// home proxies to the holder's engine. Generated over the holders: when a
// CLI command or another `conch mcp` holds it and exits, the agent's tools
// keep working (the proxy starts an engine of its own) and the session
// started before is still there; when a `conch serve` stops, the proxy
// does not take the home, so the gateway starts again and serves it.
func TestMCPOutlivesTheEngineItProxiesTo(t *testing.T) {
	for _, holder := range []string{"cli", "mcp", "serve"} {
		t.Run(holder, func(t *testing.T) {
			home := e2etest.NewHome(t, "")
			var release func()
			switch holder {
			case "cli":
				gate := filepath.Join(t.TempDir(), "go")
				t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) })
				h := exec.Command(e2etest.ConchBin, "exec", "--home", home, "--", "while [ ! -e "+gate+" ]; do sleep 0.05; done")
				h.Env = e2etest.CLIEnv()
				if err := h.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- h.Wait() }()
				release = func() {
					os.WriteFile(gate, nil, 0o600)
					select {
					case err := <-done:
						if err != nil {
							t.Fatalf("CLI: %v", err)
						}
					case <-time.After(e2etest.Slow(30 * time.Second)):
						t.Fatal("the CLI does not exit")
					}
				}
			case "mcp":
				h := e2etest.StartConch(t, home)
				release = func() { h.Close() }
			case "serve":
				g := e2etest.StartGateway(t, home)
				release = g.Stop
			}
			e2etest.Eventually(t, 10*time.Second, func() string {
				if !socketServes(filepath.Join(home, "run", "engine.sock")) {
					return "the holder does not serve the engine socket yet"
				}
				return ""
			})
			c := e2etest.StartConch(t, home)
			bg := c.Exec(map[string]any{"command": "echo before; sleep 60", "background": true})
			id := bg.Str("sessionId")
			if id == "" {
				t.Fatalf("background exec through the holder's engine: %+v", bg)
			}
			t.Cleanup(func() { exec.Command(e2etest.ConchBin, "kill", "--home", home, id).Run() })
			release()
			e2etest.Eventually(t, 10*time.Second, func() string {
				if socketServes(filepath.Join(home, "run", "engine.sock")) {
					return "the holder's socket still answers"
				}
				return ""
			})
			r := c.Exec(map[string]any{"command": "echo after-the-holder"})
			if holder == "serve" {
				if !r.IsError || strings.Contains(r.Text, "after-the-holder") {
					t.Fatalf("exec after the gateway stopped: %q", r.Text)
				}
				// The proxy kept out of the home: the gateway starts again,
				// and the proxy reaches it.
				e2etest.StartGateway(t, home)
				r = c.Exec(map[string]any{"command": "echo after-the-holder"})
			}
			if !strings.Contains(r.Text, "after-the-holder") {
				t.Fatalf("exec after the holder exited: %q", r.Text)
			}
			p := c.Process(map[string]any{"action": "log", "sessionId": id})
			if !strings.Contains(p.Text, "before") {
				t.Fatalf("log of the session started before: %q", p.Text)
			}
		})
	}
}

// psRow reports whether the table conch ps printed has a row for session
// id in status (and, when agent is set, of that agent in front), under
// its header line.
func psRow(out, agent, id, status string) bool {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "SESSION") || !strings.Contains(lines[0], "STATUS") {
		return false
	}
	want := []string{id, status}
	if agent != "" {
		want = []string{agent, id, status}
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) >= len(want) && strings.Join(f[:len(want)], " ") == strings.Join(want, " ") {
			return true
		}
	}
	return false
}
