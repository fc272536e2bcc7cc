package process

import (
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

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestTimeoutKillsTree(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"tools":{"exec":{"killGraceMs":500}}}`))
	start := time.Now()
	r := c.Exec(map[string]any{"command": "sleep 902.1 & setsid sleep 902.1 & (sleep 902.1 &) ; sleep 902.1", "timeout": 1})
	el := time.Since(start)
	if r.Str("status") != "failed" || r.Str("state") != "killed" || r.Str("killedBy") != "timeout" || r.D["timedOut"] != true {
		t.Fatalf("timeout result: %q %v", r.Text, r.D)
	}
	want := "Command timed out after 1 seconds. If this command is expected to take longer, re-run with a higher timeout (e.g., exec timeout=300)."
	if r.Text != want {
		t.Fatalf("text = %q", r.Text)
	}
	if el > 10*time.Second {
		t.Errorf("timeout took %v", el)
	}
	if r.Num("descendantsKilled") < 3 {
		t.Errorf("descendantsKilled = %v, want >= 3", r.D["descendantsKilled"])
	}
	if p := e2etest.Pgrep("sleep 902.1"); len(p) != 0 {
		t.Fatalf("processes left after timeout: %v", p)
	}
}

func TestTimeoutSecondsAlias(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "sleep 5", "timeoutSeconds": 0.2})
	if r.D["timedOut"] != true || !strings.HasPrefix(r.Text, "Command timed out after 0.2 seconds.") {
		t.Fatalf("timeoutSeconds: %q %v", r.Text, r.D)
	}
	r = c.Exec(map[string]any{"command": "true", "timeout": 1, "timeoutSeconds": 2})
	if !r.IsError || r.Str("status") != "error" {
		t.Fatalf("conflicting timeouts accepted: %q", r.Text)
	}
}

func TestIgnoresSIGTERM(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"tools":{"exec":{"killGraceMs":300}}}`))
	r := c.Exec(map[string]any{"command": "trap '' TERM; echo ready; while :; do sleep 0.05; done", "background": true})
	id := r.Str("sessionId")
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := c.Process(map[string]any{"action": "log", "sessionId": id}); p.Text != "ready" {
			return "not ready: " + p.Text
		}
		return ""
	})
	k := c.Process(map[string]any{"action": "kill", "sessionId": id})
	if k.Str("state") != "killed" || k.Str("signal") != "SIGKILL" {
		t.Fatalf("kill of a TERM-ignoring process: %q %v", k.Text, k.D)
	}
}

func TestDaemonHoldingPipes(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"tools":{"exec":{"killGraceMs":300}}}`))
	start := time.Now()
	r := c.Exec(map[string]any{"command": "echo started; (setsid sleep 903.1 &); echo done"})
	if r.Str("status") != "completed" || r.Text != "started\ndone\n\n"+e2etest.LeftoverNote(1, false) {
		t.Fatalf("daemon: %q %v", r.Text, r.D)
	}
	if r.Num("descendantsKilled") != 1 {
		t.Errorf("descendantsKilled = %v, want 1", r.D["descendantsKilled"])
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("took %v; the daemon kept the session open", el)
	}
	if p := e2etest.Pgrep("sleep 903.1"); len(p) != 0 {
		t.Fatalf("daemon survived: %v", p)
	}
}

func TestClosesStdoutKeepsRunning(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"tools":{"exec":{"killGraceMs":200}}}`))
	r := c.Exec(map[string]any{"command": "echo bye; exec >&- 2>&-; sleep 904.1", "yieldMs": 500})
	if r.Str("status") != "running" {
		t.Fatalf("want running: %q", r.Text)
	}
	id := r.Str("sessionId")
	// "bye" is in before the poll (the yield may end first on a loaded
	// machine); log does not move the poll's cursor.
	e2etest.Eventually(t, 10*time.Second, func() string {
		if l := c.Process(map[string]any{"action": "log", "sessionId": id}); l.Text != "bye" {
			return "no output yet: " + l.Text
		}
		return ""
	})
	p := c.Process(map[string]any{"action": "poll", "sessionId": id})
	if !strings.HasPrefix(p.Text, "bye\n\nProcess still running.") {
		t.Fatalf("poll: %q", p.Text)
	}
	c.Process(map[string]any{"action": "kill", "sessionId": id})
	if len(e2etest.Pgrep("sleep 904.1")) != 0 {
		t.Fatal("process survived")
	}
}

func TestCatGetsEOFInForeground(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "cat; echo after-cat", "timeout": 5})
	if r.Str("status") != "completed" || r.Text != "after-cat" {
		t.Fatalf("cat: %q %v", r.Text, r.D)
	}
}

func TestBackgroundStdinWrite(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "while read l; do echo got:$l; done; echo eof", "background": true})
	if r.Str("status") != "running" || r.Str("stdin") != "open" {
		t.Fatalf("start: %q %v", r.Text, r.D)
	}
	id := r.Str("sessionId")
	w := c.Process(map[string]any{"action": "write", "sessionId": id, "data": "héllo\n"})
	if w.Text != "Wrote 7 bytes to session "+id+"." {
		t.Fatalf("write: %q", w.Text)
	}
	s := c.Process(map[string]any{"action": "submit", "sessionId": id})
	if s.Text != "Submitted session "+id+" (sent LF)." {
		t.Fatalf("submit: %q", s.Text)
	}
	w = c.Process(map[string]any{"action": "write", "sessionId": id, "data": "last\n", "eof": true})
	if w.Text != "Wrote 5 bytes to session "+id+" (stdin closed)." {
		t.Fatalf("write eof: %q", w.Text)
	}
	p := c.WaitEnd(id, 5*time.Second)
	l := c.Process(map[string]any{"action": "log", "sessionId": id})
	if l.Text != "got:héllo\ngot:\ngot:last\neof" || p.Num("exitCode") != 0 {
		t.Fatalf("log %q; poll %q", l.Text, p.Text)
	}
	w = c.Process(map[string]any{"action": "write", "sessionId": id, "data": "x"})
	if !w.IsError || w.Text != "No active session found for "+id {
		t.Fatalf("write after end: %q", w.Text)
	}
}

func TestStdinClosedAtSpawn(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "sleep 905.1", "yieldMs": 10})
	id := r.Str("sessionId")
	w := c.Process(map[string]any{"action": "write", "sessionId": id, "data": "x"})
	want := "Session " + id + " stdin is not writable. (stdin was closed at start; use background:true or pty:true for interactive input)"
	if !w.IsError || w.Text != want {
		t.Fatalf("write: %q", w.Text)
	}
	rm := c.Process(map[string]any{"action": "remove", "sessionId": id})
	if rm.Text != "Removed session "+id+" (termination requested)." {
		t.Fatalf("remove: %q", rm.Text)
	}
	if l := c.Process(map[string]any{"action": "poll", "sessionId": id}); l.Text != "No session found for "+id {
		t.Fatalf("poll after remove: %q", l.Text)
	}
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep("sleep 905.1"); len(p) != 0 {
			return "still running"
		}
		return ""
	})
}

func TestPTYPythonREPL(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "python3 -q", "pty": true, "background": true})
	id := r.Str("sessionId")
	if r.Str("stdin") != "pty" {
		t.Fatalf("stdin = %q", r.Str("stdin"))
	}
	waitFor := func(sub string) {
		t.Helper()
		e2etest.Eventually(t, 10*time.Second, func() string {
			l := c.Process(map[string]any{"action": "log", "sessionId": id})
			if !strings.Contains(l.Text, sub) {
				return "no " + sub + " in " + l.Text
			}
			return ""
		})
	}
	waitFor(">>>")
	k := c.Process(map[string]any{"action": "send-keys", "sessionId": id, "literal": "print(6*7)", "keys": []any{"Enter"}})
	if !strings.HasPrefix(k.Text, "Sent 11 bytes to session "+id) {
		t.Fatalf("send-keys: %q", k.Text)
	}
	waitFor("42")
	c.Process(map[string]any{"action": "send-keys", "sessionId": id, "keys": []any{"C-d"}})
	p := c.WaitEnd(id, 10*time.Second)
	if !strings.HasSuffix(p.Text, "Process exited with code 0.") {
		t.Fatalf("end: %q", p.Text)
	}
}

func TestPTYIsATerminal(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "test -t 0 && test -t 1 && stty size && echo $TERM", "pty": true})
	if r.Str("status") != "completed" || !strings.Contains(r.Text, "30 120") {
		t.Fatalf("pty: %q %v", r.Text, r.D)
	}
	r = c.Exec(map[string]any{"command": "test -t 1 || echo not-a-tty"})
	if r.Text != "not-a-tty" {
		t.Fatalf("pipes: %q", r.Text)
	}
}

func TestRestartSurvival(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "echo before; while read l; do echo got:$l; done; echo bye; exit 7", "background": true})
	id := r.Str("sessionId")
	r2 := c.Exec(map[string]any{"command": "sleep 0.5; echo finished-alone; exit 5", "background": true})
	id2 := r2.Str("sessionId")
	c.Process(map[string]any{"action": "write", "sessionId": id, "data": "one\n"})
	e2etest.Eventually(t, 5*time.Second, func() string {
		if l := c.Process(map[string]any{"action": "log", "sessionId": id}); l.Text != "before\ngot:one" {
			return "log: " + l.Text
		}
		return ""
	})
	c.Kill9()

	// While no conch runs, session 2 ends by itself: its supervisor
	// (which may be a host of session 1 too) commits the end state.
	e2etest.Eventually(t, 10*time.Second, func() string {
		if ex, ok, _ := proto.ReadExit(filepath.Join(home, "sessions", id2)); !ok || !ex.Final {
			return "session 2 still running"
		}
		return ""
	})

	c = e2etest.StartConch(t, home)
	l := c.Process(map[string]any{"action": "log", "sessionId": id})
	if l.Text != "before\ngot:one" || l.Str("status") != "running" {
		t.Fatalf("log after restart: %q %v", l.Text, l.D)
	}
	p2 := c.Process(map[string]any{"action": "poll", "sessionId": id2})
	if p2.Text != "finished-alone\n\nProcess exited with code 5." {
		t.Fatalf("session that ended while conch was down: %q", p2.Text)
	}
	c.Process(map[string]any{"action": "write", "sessionId": id, "data": "two\n", "eof": true})
	p := c.WaitEnd(id, 5*time.Second)
	l = c.Process(map[string]any{"action": "log", "sessionId": id})
	if p.Num("exitCode") != 7 || l.Text != "before\ngot:one\ngot:two\nbye" {
		t.Fatalf("after restart: %q %v; log %q", p.Text, p.D, l.Text)
	}
	ls := c.Process(map[string]any{"action": "list"})
	if !strings.Contains(ls.Text, id+" failed ") || !strings.Contains(ls.Text, id2+" failed ") {
		t.Fatalf("list: %q", ls.Text)
	}
}

func TestRestartKillAfterRestart(t *testing.T) {
	home := e2etest.NewHome(t, `{"tools":{"exec":{"killGraceMs":300}}}`)
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "sleep 906.1 & sleep 906.1", "background": true})
	id := r.Str("sessionId")
	c.Kill9()
	c = e2etest.StartConch(t, home)
	// This home's two sleeps (another test run on the machine may have its
	// own sleep 906.1).
	var sleeps []string
	e2etest.Eventually(t, 5*time.Second, func() string {
		if sleeps = e2etest.PgrepHome("^sleep 906.1", home); len(sleeps) != 2 {
			return fmt.Sprintf("sleeps of the session: %v", sleeps)
		}
		return ""
	})
	k := c.Process(map[string]any{"action": "kill", "sessionId": id})
	if k.Text != "Killed session "+id+"." {
		t.Fatalf("kill after restart: %q", k.Text)
	}
	for _, p := range sleeps {
		if pid, _ := strconv.Atoi(p); !e2etest.IsZombie(pid) {
			t.Fatalf("left: %s", p)
		}
	}
}

func TestLostSupervisor(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "sleep 907.1", "background": true})
	id := r.Str("sessionId")
	c.Kill9()
	// The supervisor dies without recording an end (as in an OOM kill).
	pid := e2etest.SupervisorPID(t, home, id)
	syscall.Kill(pid, syscall.SIGKILL)
	// Dead, and its socket with it, before the next conch looks.
	e2etest.Eventually(t, 10*time.Second, func() string {
		if !e2etest.IsZombie(pid) {
			return fmt.Sprintf("supervisor %d still alive after SIGKILL", pid)
		}
		return ""
	})
	c = e2etest.StartConch(t, home)
	p := c.Process(map[string]any{"action": "poll", "sessionId": id})
	if p.Str("state") != "lost" || !strings.HasSuffix(p.Text, "Process lost (its supervisor ended without an exit status).") {
		t.Fatalf("poll: %q %v", p.Text, p.D)
	}
	if left := e2etest.Pgrep("sleep 907.1"); len(left) != 0 {
		t.Fatalf("the lost session's process was not swept: %v", left)
	}
	if _, err := os.Stat(filepath.Join(home, "sessions", id, "exit.json")); err != nil {
		t.Fatal(err)
	}
}

func TestHomeLockedAndNotWritable(t *testing.T) {
	home := e2etest.NewHome(t, "")
	e2etest.StartConch(t, home)
	// A second engine cannot take the home (a second conch mcp proxies to
	// the first through its engine socket instead; see e2e/gateway/serve_test.go).
	out, err := exec.Command(e2etest.ConchBin, "serve", "--home", home, "--listen", "127.0.0.1:0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 6 || !strings.Contains(string(out), "is in use by pid") || !strings.Contains(string(out), "(mcp)") {
		t.Fatalf("second engine: %v %s", err, out)
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	out, err = exec.Command(e2etest.ConchBin, "mcp", "--home", filepath.Join(f, "home")).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 6 || !strings.Contains(string(out), "is not writable") {
		t.Fatalf("unwritable home: %v %s", err, out)
	}
}

func TestRestartDuringYieldWindow(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	go c.CS.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "sleep 1; echo made-it; exit 2"}})
	// Wait until the session exists, then kill conch in the yield window.
	var id string
	e2etest.Eventually(t, 10*time.Second, func() string {
		entries, _ := os.ReadDir(filepath.Join(home, "sessions"))
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(home, "sessions", e.Name(), "meta.json")); err == nil {
				id = e.Name()
				return ""
			}
		}
		return "no session yet"
	})
	c.Kill9()
	c = e2etest.StartConch(t, home)
	ls := c.Process(map[string]any{"action": "list"})
	if !strings.Contains(ls.Text, id+" ") {
		t.Fatalf("cut foreground session not listed: %q", ls.Text)
	}
	p := c.WaitEnd(id, 10*time.Second)
	l := c.Process(map[string]any{"action": "log", "sessionId": id})
	if p.Num("exitCode") != 2 || l.Text != "made-it" {
		t.Fatalf("after restart: %q %v log %q", p.Text, p.D, l.Text)
	}
}

// TestSupervisorModes: with session cgroups, the sessions of an engine
// share one shared supervisor and its control socket, and survive a restart
// of the engine together; CONCH_SUPERVISOR=process gives each session a
// supervisor of its own.
func TestSupervisorModes(t *testing.T) {
	meta := func(t *testing.T, home, id string) (pid int, socket string) {
		t.Helper()
		var m proto.Meta
		if err := fsutil.ReadJSON(proto.MetaPath(proto.SessionDir(home, id)), &m); err != nil {
			t.Fatalf("meta.json of %s: %v", id, err)
		}
		return m.SupervisorPID, m.Socket
	}
	t.Run("host", func(t *testing.T) {
		if !supervisor.CgroupAvailable() {
			t.Skip("no session cgroup can be created here (no writable cgroup v2, v1 pids or freezer), so conch gives each session its own supervisor")
		}
		home := e2etest.NewHome(t, "")
		hostEnv := []string{"CONCH_SUPERVISOR="} // whatever the suite runs with
		c := e2etest.StartConchEnv(t, home, hostEnv)
		a := c.Exec(map[string]any{"command": "read l; echo got:$l", "background": true}).Str("sessionId")
		b := c.Exec(map[string]any{"command": "sleep 30", "background": true}).Str("sessionId")
		// Killed at once: the host has not written the sessions' files
		// yet (it waits 250 ms); it does when the engine goes, and the
		// next engine has it finish before it reads the home.
		c.Kill9()
		c = e2etest.StartConchEnv(t, home, hostEnv)
		pa, sa := meta(t, home, a)
		pb, sb := meta(t, home, b)
		if pa != pb || sa != sb || filepath.Base(sa) != fmt.Sprintf("host-%d.sock", pa) {
			t.Fatalf("sessions not on one host: %d %s, %d %s", pa, sa, pb, sb)
		}
		if out, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pa)); !strings.Contains(string(out), "--host") {
			t.Fatalf("supervisor %d is not a host: %q", pa, out)
		}
		c.Process(map[string]any{"action": "write", "sessionId": a, "data": "after\n"})
		p := c.WaitEnd(a, 10*time.Second)
		if !strings.Contains(p.Text, "got:after") || p.Str("status") != "completed" {
			t.Fatalf("session a after the restart: %q %v", p.Text, p.D)
		}
		if k := c.Process(map[string]any{"action": "kill", "sessionId": b}); k.IsError {
			t.Fatalf("kill b: %q", k.Text)
		}
		if p := c.WaitEnd(b, 10*time.Second); p.Str("status") != "failed" || p.D["killedBy"] != "agent" {
			t.Fatalf("session b: %q %v", p.Text, p.D)
		}
		// The old host leaves once its sessions have ended.
		e2etest.Eventually(t, 10*time.Second, func() string {
			if syscall.Kill(pa, 0) == nil && !e2etest.IsZombie(pa) {
				return "the first engine's host still runs"
			}
			return ""
		})
	})
	t.Run("process", func(t *testing.T) {
		home := e2etest.NewHome(t, "")
		c := e2etest.StartConchEnv(t, home, []string{"CONCH_SUPERVISOR=process"})
		a := c.Exec(map[string]any{"command": "sleep 30", "background": true}).Str("sessionId")
		b := c.Exec(map[string]any{"command": "sleep 30", "background": true}).Str("sessionId")
		pa, sa := meta(t, home, a)
		pb, sb := meta(t, home, b)
		if pa == pb || filepath.Base(sa) != a+".sock" || filepath.Base(sb) != b+".sock" {
			t.Fatalf("sessions share a supervisor: %d %s, %d %s", pa, sa, pb, sb)
		}
		for _, id := range []string{a, b} {
			c.Process(map[string]any{"action": "kill", "sessionId": id})
			c.WaitEnd(id, 10*time.Second)
		}
	})
}

// TestSessionDirsReused: a foreground exec's session directory is emptied
// and reused by the next session (one inode, not one per exec), also after
// a restart, and only pooled directories remain in sessions/.
func TestSessionDirsReused(t *testing.T) {
	home := e2etest.NewHome(t, "")
	sessions := filepath.Join(home, "sessions")
	pooled := func() (names []string, inodes map[uint64]bool) {
		inodes = map[uint64]bool{}
		ents, _ := os.ReadDir(sessions)
		for _, en := range ents {
			names = append(names, en.Name())
			if fi, err := os.Stat(filepath.Join(sessions, en.Name())); err == nil && strings.HasPrefix(en.Name(), ".free-") {
				inodes[fi.Sys().(*syscall.Stat_t).Ino] = true
			}
		}
		return names, inodes
	}
	settled := func() map[uint64]bool {
		t.Helper()
		var inodes map[uint64]bool
		e2etest.Eventually(t, 5*time.Second, func() string {
			var names []string
			names, inodes = pooled()
			for _, n := range names {
				if !strings.HasPrefix(n, ".free-") {
					return fmt.Sprintf("sessions/ holds %v", names)
				}
			}
			if len(names) == 0 {
				return "no pooled directory"
			}
			return ""
		})
		return inodes
	}
	c := e2etest.StartConch(t, home)
	run := func(i int) {
		t.Helper()
		want := fmt.Sprintf("out-%d", i)
		if r := c.Exec(map[string]any{"command": "echo " + want}); r.Text != want {
			t.Fatalf("exec %d: %q %v", i, r.Text, r.D)
		}
	}
	run(0)
	first := settled()
	// Each exec's directory goes back to the pool after its result, a
	// moment later on a loaded machine: wait for that before the next
	// exec, or the next one takes a fresh directory.
	var later map[uint64]bool
	for i := 1; i <= 10; i++ {
		run(i)
		later = settled()
	}
	if len(later) > 2 {
		t.Errorf("%d pooled directories after sequential execs", len(later))
	}
	reused := false
	for ino := range first {
		reused = reused || later[ino]
	}
	if !reused {
		t.Errorf("the first directory (inodes %v) was not reused (now %v)", first, later)
	}
	c.Close()
	c = e2etest.StartConch(t, home)
	run(11)
	if after := settled(); len(after) > len(later) {
		t.Errorf("after a restart the pool grew from %v to %v: not taken back", later, after)
	}
}

// TestHostCrashAfterEnd: a host killed after a session ended but before
// its late exit.json: the engine, which has the end state, writes it, and
// the next engine start finds the session exited, not lost.
func TestHostCrashAfterEnd(t *testing.T) {
	if !supervisor.CgroupAvailable() {
		t.Skip("no session cgroup can be created here (no writable cgroup v2, v1 pids or freezer), so there is no shared supervisor")
	}
	home := e2etest.NewHome(t, "")
	env := []string{"CONCH_SUPERVISOR="}
	c := e2etest.StartConchEnv(t, home, env)
	id := c.Exec(map[string]any{"command": "sleep 0.3; exit 3", "background": true}).Str("sessionId")
	if p := c.WaitEnd(id, 10*time.Second); p.Num("exitCode") != 3 {
		t.Fatalf("end: %q %v", p.Text, p.D)
	}
	hosts := e2etest.Pgrep("supervise --home " + home + " --host")
	if len(hosts) == 0 {
		t.Fatal("no shared supervisor runs")
	}
	for _, pid := range hosts {
		n, _ := strconv.Atoi(pid)
		syscall.Kill(n, syscall.SIGKILL)
	}
	dir := proto.SessionDir(home, id)
	e2etest.Eventually(t, 5*time.Second, func() string {
		ex, ok, err := proto.ReadExit(dir)
		if !ok || !ex.Final || ex.ExitCode == nil || *ex.ExitCode != 3 {
			return fmt.Sprintf("exit.json: %+v %v", ex, err)
		}
		return ""
	})
	c.Close()
	c = e2etest.StartConchEnv(t, home, env)
	p := c.Process(map[string]any{"action": "poll", "sessionId": id})
	if p.Str("state") != "exited" || p.Num("exitCode") != 3 {
		t.Fatalf("after the restart: %q %v", p.Text, p.D)
	}
}

// TestSessionDirsReusedConcurrently: concurrent foreground execs reuse
// session directories while the supervisors of the sessions that last had
// them may not have closed their journals yet; none fails. (Each mode;
// with a supervisor process per session a reused directory was still
// locked by the previous supervisor's journal.)
func TestSessionDirsReusedConcurrently(t *testing.T) {
	for _, mode := range []string{"process", ""} {
		t.Run("supervisor="+mode, func(t *testing.T) {
			if mode == "" && !supervisor.CgroupAvailable() {
				t.Skip("no session cgroup can be created here, so there is no shared supervisor")
			}
			c := e2etest.StartConchEnv(t, e2etest.NewHome(t, ""), []string{"CONCH_SUPERVISOR=" + mode})
			const workers, each = 4, 25
			errs := make(chan string, workers*each)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						want := fmt.Sprintf("w%d-%d", w, i)
						res, err := c.CS.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo " + want}})
						if err != nil {
							errs <- err.Error()
							continue
						}
						if tc, ok := res.Content[0].(*mcp.TextContent); !ok || res.IsError || tc.Text != want {
							errs <- fmt.Sprintf("%s: %+v", want, res.Content[0])
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			n := 0
			for e := range errs {
				if n++; n <= 3 {
					t.Errorf("exec failed: %s", e)
				}
			}
			if n > 0 {
				t.Errorf("%d of %d execs failed", n, workers*each)
			}
		})
	}
}
