package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestFrozenSupervisorHostAnswersInBound freezes the shared supervisor
// host (SIGSTOP, as a wedged host looks to the engine) and makes, all at
// once, every call that waits on it: exec starts (with a yield window,
// in the background, with a PTY), and each process action on its
// sessions. Every call must answer within its own window and a small
// bound, and say honestly what it knows: a start that was not reported
// did not happen (and does not happen once the host runs again), a
// request that was not answered says the supervisor is not responding.
// The engine waited 15 s for a start report and 10 s for each control
// request (a kill 4 s more).
func TestFrozenSupervisorHostAnswersInBound(t *testing.T) {
	home := e2etest.NewHome(t, `{"tools":{"exec":{"killGraceMs":500}}}`)
	c := e2etest.StartConch(t, home)
	pipe := c.Exec(map[string]any{"command": "cat", "background": true})
	tty := c.Exec(map[string]any{"command": "cat", "background": true, "pty": true})
	a, b := pipe.Str("sessionId"), tty.Str("sessionId")
	if a == "" || b == "" {
		t.Fatalf("background sessions: %q / %q", pipe.Text, tty.Text)
	}
	host := e2etest.SupervisorPID(t, home, a)
	if other := e2etest.SupervisorPID(t, home, b); other != host {
		t.Skipf("sessions are not in one shared supervisor (pids %d, %d): no shared hosts here", host, other)
	}
	if err := syscall.Kill(host, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			syscall.Kill(host, syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)

	markers := t.TempDir()
	marker := func(name string) string { return filepath.Join(markers, name) }
	// bound is what a call may take beyond its window: the start bound
	// or a control request's (3 s), an MCP round trip on a loaded
	// machine, and margin; the old waits were 10 s and more.
	const bound = 6500 * time.Millisecond
	type member struct {
		name   string
		tool   string
		window time.Duration
		args   map[string]any
		// honest checks the answer; "" when it is.
		honest func(e2etest.Result) string
	}
	says := func(words ...string) func(e2etest.Result) string {
		return func(r e2etest.Result) string {
			for _, w := range words {
				if !strings.Contains(r.Text, w) {
					return "does not say " + strconv.Quote(w)
				}
			}
			return ""
		}
	}
	started := func(r e2etest.Result) string {
		// A start on the frozen host is refused as not started; one the
		// pool sent to a fresh host (after retiring the frozen one) runs.
		switch r.Str("status") {
		case "running", "completed":
			return ""
		}
		if strings.Contains(r.Text, "not started") {
			return ""
		}
		return "neither ran nor says it was not started"
	}
	members := []member{
		{"exec yieldMs=1000", "exec", time.Second, map[string]any{"command": "touch " + marker("yield"), "yieldMs": 1000}, started},
		{"exec background", "exec", 0, map[string]any{"command": "touch " + marker("background"), "background": true}, started},
		{"exec pty yieldMs=500", "exec", 500 * time.Millisecond, map[string]any{"command": "touch " + marker("pty"), "pty": true, "yieldMs": 500}, started},
		{"poll", "process", 0, map[string]any{"action": "poll", "sessionId": a}, says("not responding")},
		{"poll timeout=500", "process", 500 * time.Millisecond, map[string]any{"action": "poll", "sessionId": a, "timeout": 500}, says("not responding")},
		{"log", "process", 0, map[string]any{"action": "log", "sessionId": a}, nil},
		{"write", "process", 0, map[string]any{"action": "write", "sessionId": a, "data": "x"}, says("not responding", "nothing was sent")},
		{"submit", "process", 0, map[string]any{"action": "submit", "sessionId": b, "data": "y"}, says("not responding", "nothing was sent")},
		{"send-keys", "process", 0, map[string]any{"action": "send-keys", "sessionId": b, "keys": []string{"Enter"}}, says("not responding")},
		{"paste", "process", 0, map[string]any{"action": "paste", "sessionId": b, "text": "z"}, says("not responding")},
		{"screen", "process", 0, map[string]any{"action": "screen", "sessionId": b}, nil},
		{"wait idle", "process", time.Second, map[string]any{"action": "wait", "sessionId": a, "until": "idle", "idleMs": 200, "timeout": 1000}, nil},
		{"list", "process", 0, map[string]any{"action": "list"}, nil},
		{"kill", "process", 0, map[string]any{"action": "kill", "sessionId": a}, says("not responding", "not delivered")},
	}
	var wg sync.WaitGroup
	results := make([]e2etest.Result, len(members))
	took := make([]time.Duration, len(members))
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			results[i] = c.Call(m.tool, m.args)
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for i, m := range members {
		r := results[i]
		if took[i] > m.window+bound {
			t.Errorf("%s took %v with the host frozen, want at most %v: %q", m.name, took[i].Round(time.Millisecond), m.window+bound, r.Text)
		}
		if m.honest != nil {
			if why := m.honest(r); why != "" {
				t.Errorf("%s: the answer %s: %q", m.name, why, r.Text)
			}
		}
	}

	// Running again, its sessions answer, and once they are gone it
	// exits without starting what it was refused for.
	thaw()
	for _, id := range []string{a, b} {
		r := c.Process(map[string]any{"action": "kill", "sessionId": id})
		if !strings.Contains(r.Text, "Killed session") && !strings.Contains(r.Text, "Termination requested") {
			t.Errorf("kill after the thaw: %q", r.Text)
		}
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		if !e2etest.IsZombie(host) {
			return "the host still runs"
		}
		return ""
	})
	for i, m := range members[:3] {
		if _, err := os.Stat(m.args["command"].(string)[len("touch "):]); err == nil && strings.Contains(results[i].Text, "not started") {
			t.Errorf("%s answered %q, yet its command ran once the host ran again", m.name, results[i].Text)
		}
	}
	if r := c.Exec(map[string]any{"command": "echo after"}); r.Str("status") != "completed" || !strings.Contains(r.Text, "after") {
		t.Errorf("exec after the thaw: %q", r.Text)
	}
}
