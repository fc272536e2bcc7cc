package state

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// damages are the ways a state file is damaged: each returns the damaged
// bytes of b.
var damages = []struct {
	name string
	fn   func(b []byte) []byte
}{
	{"zero-length", func(b []byte) []byte { return nil }},
	{"cut-1", func(b []byte) []byte { return b[:1] }},
	{"cut-half", func(b []byte) []byte { return b[:len(b)/2] }},
	{"cut-last-byte", func(b []byte) []byte { return b[:len(b)-1] }},
	{"cut-before-brace", func(b []byte) []byte { return b[:len(b)-2] }},
	{"flip-early", func(b []byte) []byte { return flip(b, len(b)/5) }},
	{"flip-middle", func(b []byte) []byte { return flip(b, len(b)/2) }},
	{"flip-late", func(b []byte) []byte { return flip(b, len(b)*4/5) }},
	{"garbage", func(b []byte) []byte { return []byte("\x00\x17garbage{{{not json") }},
}

// flip changes the byte at i into another byte that keeps the file valid
// UTF-8 text where it can (a digit into another digit, a letter into
// another letter), the hardest damage to notice.
func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	switch c := b[i]; {
	case c >= '0' && c <= '8':
		b[i] = c + 1
	case c == '9':
		b[i] = '0'
	case c >= 'a' && c <= 'y':
		b[i] = c + 1
	default:
		b[i] ^= 0x01
	}
	return b
}

func damageFile(t *testing.T, path string, fn func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fn(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// wantDamage waits until conch's stderr (log) holds the one "damaged state
// file" warning for path, of kind: the warnings a damage test provokes are
// checked, not printed.
func wantDamage(t *testing.T, log *e2etest.Log, kind, path string) {
	t.Helper()
	e2etest.Eventually(t, 10*time.Second, func() string {
		if got, ok := log.DamageRecords()[path]; !ok || got != kind {
			return fmt.Sprintf("no %s warning for %s (kind %q) in conch's stderr:\n%s", kind, path, got, log)
		}
		return ""
	})
	if n := strings.Count(log.String(), "path="+path+" "); n != 1 {
		t.Errorf("%d warnings for %s, want 1:\n%s", n, path, log)
	}
}

// TestDamageStateFiles generates its cases: each state file of a finished
// session (exit.json, meta.json, state.json) and of a running one
// (meta.json, state.json), damaged each way in damages. After one restart
// of conch every session must report the honest state: a finished one its
// exit code 3 and its output, a running one "running", and then take input
// and end with its own exit code. Never lost, never gone.
func TestDamageStateFiles(t *testing.T) {
	type member struct {
		file    string
		running bool
		damage  int
		id      string
	}
	var ms []*member
	for d := range damages {
		for _, f := range []string{"exit.json", "meta.json", "state.json"} {
			ms = append(ms, &member{file: f, damage: d})
		}
		for _, f := range []string{"meta.json", "state.json"} {
			ms = append(ms, &member{file: f, running: true, damage: d})
		}
	}
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	for i, m := range ms {
		cmd := fmt.Sprintf("echo out-%d; exit 3", i)
		if m.running {
			cmd = fmt.Sprintf("read x; echo got-$x; exit %d", 10+i%100)
		}
		m.id = c.Exec(map[string]any{"command": cmd, "background": true}).Str("sessionId")
	}
	for _, m := range ms {
		e2etest.SupervisorPID(t, home, m.id)
		if m.running {
			continue
		}
		e2etest.Eventually(t, 30*time.Second, func() string {
			if _, err := os.Stat(filepath.Join(home, "sessions", m.id, "exit.json")); err != nil {
				return err.Error()
			}
			return ""
		})
	}
	c.Kill9()
	for _, m := range ms {
		damageFile(t, filepath.Join(home, "sessions", m.id, m.file), damages[m.damage].fn)
	}
	c = e2etest.StartConch(t, home)
	for i, m := range ms {
		name := fmt.Sprintf("%s of a %s session, %s", m.file, map[bool]string{false: "finished", true: "running"}[m.running], damages[m.damage].name)
		p := c.Process(map[string]any{"action": "poll", "sessionId": m.id})
		if m.running {
			if p.Str("status") != "running" {
				t.Errorf("%s: after restart: %q %v", name, p.Text, p.D)
			}
			continue
		}
		if p.Str("state") != "exited" || p.Num("exitCode") != 3 {
			t.Errorf("%s: after restart: %q %v", name, p.Text, p.D)
		}
		if l := c.Process(map[string]any{"action": "log", "sessionId": m.id}); l.Text != fmt.Sprintf("out-%d", i) {
			t.Errorf("%s: log after restart: %q", name, l.Text)
		}
		if m.file == "exit.json" {
			b, _ := os.ReadFile(filepath.Join(home, "sessions", m.id, "exit.json"))
			if !bytes.Contains(b, []byte(`"exitCode": 3`)) {
				t.Errorf("%s: exit.json not repaired: %q", name, b)
			}
		}
	}
	// Every damaged file is reported once, with its kind, and nothing
	// else is.
	kinds := map[string]string{"exit.json": "exit", "meta.json": "meta", "state.json": "state"}
	for _, m := range ms {
		wantDamage(t, c.Stderr, kinds[m.file], filepath.Join(home, "sessions", m.id, m.file))
	}
	if got := c.Stderr.DamageRecords(); len(got) != len(ms) {
		t.Errorf("%d damaged files reported, want %d: %v", len(got), len(ms), got)
	}
	for i, m := range ms {
		if !m.running {
			continue
		}
		name := fmt.Sprintf("%s of a running session, %s", m.file, damages[m.damage].name)
		c.Process(map[string]any{"action": "write", "sessionId": m.id, "data": "go\n", "eof": true})
		p := c.WaitEnd(m.id, 30*time.Second)
		if p.Num("exitCode") != float64(10+i%100) || !strings.Contains(p.Text, "got-go") {
			t.Errorf("%s: end: %q %v", name, p.Text, p.D)
		}
	}
}

var unreadable = regexp.MustCompile(`\[… (\d+) bytes unreadable …\]`)

// fiftyLines runs a command printing 50 numbered lines a little apart (so
// they land in separate journal records) and exiting 3, and returns its
// session id and journal segment once it ended.
func fiftyLines(t *testing.T, c *e2etest.Conch, home string) (string, string) {
	t.Helper()
	r := c.Exec(map[string]any{"command": "for i in $(seq 1 50); do echo line-$i; sleep 0.01; done; exit 3", "background": true})
	id := r.Str("sessionId")
	if id == "" {
		t.Fatalf("exec: %q %v", r.Text, r.D)
	}
	c.WaitEnd(id, 60*time.Second)
	segs, _ := filepath.Glob(filepath.Join(home, "sessions", id, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	return id, segs[0]
}

// TestDamageJournalFlip flips one byte in the middle of a finished
// session's journal: log shows every other line, marks the gap and says
// truncated.
func TestDamageJournalFlip(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	id, seg := fiftyLines(t, c, home)
	b, _ := os.ReadFile(seg)
	i := bytes.Index(b, []byte("line-25\n"))
	if i < 0 {
		t.Fatalf("line-25 not in the segment")
	}
	damageFile(t, seg, func(b []byte) []byte { return flip(b, i+2) })
	l := c.Process(map[string]any{"action": "log", "sessionId": id})
	lines := strings.Split(l.Text, "\n")
	m := unreadable.FindStringSubmatch(l.Text)
	if len(lines) < 47 || m == nil || l.D["truncated"] != true || l.Num("unreadableBytes") <= 0 || !strings.Contains(l.Text, "line-50") {
		t.Fatalf("log of the damaged journal (%d lines): %q %v", len(lines), l.Text, l.D)
	}
	if strings.Contains(l.Text, "line-25\n") {
		t.Fatalf("the damaged line is shown: %q", l.Text)
	}
	wantDamage(t, c.Stderr, "journal", filepath.Join(home, "sessions", id))
}

// TestDamageJournalCut cuts half of a finished session's journal off: log
// shows the first half and marks the lost end.
func TestDamageJournalCut(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	id, seg := fiftyLines(t, c, home)
	damageFile(t, seg, func(b []byte) []byte { return b[:len(b)/2] })
	l := c.Process(map[string]any{"action": "log", "sessionId": id})
	if !strings.HasPrefix(l.Text, "line-1\nline-2\n") || unreadable.FindString(l.Text) == "" || l.D["truncated"] != true {
		t.Fatalf("log of the cut journal: %q %v", l.Text, l.D)
	}
	wantDamage(t, c.Stderr, "journal", filepath.Join(home, "sessions", id))
}

// TestDamageMetrics: a damaged exit.json found at start is counted in
// /metrics by kind.
func TestDamageMetrics(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	id := c.Exec(map[string]any{"command": "exit 3", "background": true}).Str("sessionId")
	c.WaitEnd(id, 30*time.Second)
	exitPath := filepath.Join(home, "sessions", id, "exit.json")
	e2etest.Eventually(t, 10*time.Second, func() string {
		if _, err := os.Stat(exitPath); err != nil {
			return err.Error()
		}
		return ""
	})
	c.Kill9()
	damageFile(t, exitPath, func(b []byte) []byte { return b[:len(b)/2] })
	g := e2etest.StartGateway(t, home)
	req, _ := http.NewRequest("GET", g.Base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+g.Operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`conch_corrupt_files_total{kind="exit"} 1`, `conch_corrupt_files_total{kind="meta"} 0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
	wantDamage(t, g.Stderr, "exit", exitPath)
}

// TestRetainBurstUnread: more background sessions than maxRetained end
// without anyone reading them: none is lost.
func TestRetainBurstUnread(t *testing.T) {
	home := e2etest.NewHome(t, `{"quotas":{"maxRunning":3,"maxRetained":3}}`)
	c := e2etest.StartConch(t, home)
	var ids []string
	for batch := range 3 {
		var now []string
		for i := range 3 {
			r := c.Exec(map[string]any{"command": fmt.Sprintf("echo r-%d-%d", batch, i), "background": true})
			if r.Str("sessionId") == "" {
				t.Fatalf("exec: %q %v", r.Text, r.D)
			}
			now = append(now, r.Str("sessionId"))
		}
		// Wait for the ends on disk, without reading the results.
		for _, id := range now {
			e2etest.Eventually(t, 30*time.Second, func() string {
				if _, err := os.Stat(filepath.Join(home, "sessions", id, "exit.json")); err != nil {
					return err.Error()
				}
				return ""
			})
		}
		ids = append(ids, now...)
	}
	for n, id := range ids {
		l := c.Process(map[string]any{"action": "log", "sessionId": id})
		if l.Text != fmt.Sprintf("r-%d-%d", n/3, n%3) {
			t.Errorf("session %d (%s): %q", n, id, l.Text)
		}
	}
}

// ownPidsCgroup returns this process's cgroup directory in the v1 pids
// hierarchy (conch's own, which it inherits), or "" if there is none.
func ownPidsCgroup() string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == "pids" {
			return filepath.Join("/sys/fs/cgroup/pids", f[2])
		}
	}
	return ""
}

// TestCleanRunAfterHostDeath: a shared supervisor killed with its engine
// leaves its socket, its log and its session's cgroup; an empty session
// cgroup of a dead supervisor lies around too. The next conch removes
// them all (and ends the orphaned command).
func TestCleanRunAfterHostDeath(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	script := filepath.Join(t.TempDir(), e2etest.Marker(t)+".sh")
	os.WriteFile(script, []byte("sleep 931.7\n"), 0o600)
	id := c.Exec(map[string]any{"command": "sh " + script, "background": true}).Str("sessionId")
	sup := e2etest.SupervisorPID(t, home, id)
	e2etest.Eventually(t, 10*time.Second, func() string {
		// Anchored: under dash (SHELL unset, as in CI) the shell that runs
		// the command line stays as its parent and names the marker too.
		if len(e2etest.Pgrep("^sh "+regexp.QuoteMeta(script))) != 1 {
			return "command not started"
		}
		return ""
	})
	sock := filepath.Join(home, "run", "s", fmt.Sprintf("host-%d.sock", sup))
	logf := filepath.Join(home, "run", fmt.Sprintf("supervisor-host-%d.log", sup))
	if _, err := os.Stat(sock); err != nil {
		t.Skipf("sessions do not run in a shared supervisor here: %v", err)
	}
	c.Kill9()
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		if !e2etest.IsZombie(sup) {
			return "host still alive"
		}
		return ""
	})
	// An empty cgroup named for a supervisor that is gone.
	var fake string
	if own := ownPidsCgroup(); own != "" {
		dead := exec.Command("true")
		dead.Run()
		fake = filepath.Join(own, fmt.Sprintf("conch-cleanrun-test-%d", dead.Process.Pid))
		if err := os.Mkdir(fake, 0o755); err != nil {
			fake = ""
		} else {
			t.Cleanup(func() { os.Remove(fake) })
		}
	}
	for _, p := range []string{sock, logf} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("before restart: %v", err)
		}
	}
	c = e2etest.StartConch(t, home)
	e2etest.Eventually(t, 20*time.Second, func() string {
		for _, p := range []string{sock, logf, fake} {
			if _, err := os.Stat(p); p != "" && err == nil {
				return "still there: " + p
			}
		}
		if left := e2etest.Pgrep(e2etest.Marker(t)); len(left) > 0 {
			return fmt.Sprintf("orphaned command still runs: %v", left)
		}
		if own := ownPidsCgroup(); own != "" {
			if m, _ := filepath.Glob(filepath.Join(own, "conch-"+id+"-*")); len(m) > 0 {
				return fmt.Sprintf("session cgroup left: %v", m)
			}
		}
		return ""
	})
	if fake == "" {
		t.Log("no writable pids cgroup: the empty-cgroup part was not checked")
	}
}

// TestDamageMetaSingleSupervisor: with one supervisor process per session
// (no hosts), a damaged meta.json is given back by the session's own
// supervisor.
func TestDamageMetaSingleSupervisor(t *testing.T) {
	home := e2etest.NewHome(t, "")
	env := []string{"CONCH_SUPERVISOR=process"}
	c := e2etest.StartConchEnv(t, home, env)
	id := c.Exec(map[string]any{"command": "read x; echo got-$x; exit 7", "background": true}).Str("sessionId")
	e2etest.SupervisorPID(t, home, id)
	c.Kill9()
	damageFile(t, filepath.Join(home, "sessions", id, "meta.json"), damages[len(damages)-1].fn)
	c = e2etest.StartConchEnv(t, home, env)
	if p := c.Process(map[string]any{"action": "poll", "sessionId": id}); p.Str("status") != "running" {
		t.Fatalf("after restart: %q %v", p.Text, p.D)
	}
	c.Process(map[string]any{"action": "write", "sessionId": id, "data": "go\n", "eof": true})
	if p := c.WaitEnd(id, 30*time.Second); p.Num("exitCode") != 7 || !strings.Contains(p.Text, "got-go") {
		t.Fatalf("end: %q %v", p.Text, p.D)
	}
	wantDamage(t, c.Stderr, "meta", filepath.Join(home, "sessions", id, "meta.json"))
}

// TestDamageMetaSupervisorGone: meta.json is damaged and the supervisor is
// gone too, so nothing can give the record back: the session is reported
// lost, keeps its output, and the command it left running is ended (found
// by its cgroup), not left behind.
func TestDamageMetaSupervisorGone(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	// The command is found by a marker in its command line: once its
	// supervisor is gone, e2etest.PgrepHome no longer sees it.
	script := filepath.Join(t.TempDir(), e2etest.Marker(t)+".sh")
	os.WriteFile(script, []byte("sleep 932.3\n"), 0o600)
	id := c.Exec(map[string]any{"command": "echo started; sh " + script, "background": true}).Str("sessionId")
	sup := e2etest.SupervisorPID(t, home, id)
	e2etest.Eventually(t, 10*time.Second, func() string {
		// Anchored: under dash (SHELL unset, as in CI) the shell that runs
		// the command line stays as its parent and names the marker too.
		if len(e2etest.Pgrep("^sh "+regexp.QuoteMeta(script))) != 1 {
			return "command not started"
		}
		return ""
	})
	c.Kill9()
	syscall.Kill(sup, syscall.SIGKILL)
	e2etest.Eventually(t, 10*time.Second, func() string {
		if !e2etest.IsZombie(sup) {
			return "supervisor still alive"
		}
		return ""
	})
	damageFile(t, filepath.Join(home, "sessions", id, "meta.json"), damages[len(damages)-1].fn)
	c = e2etest.StartConch(t, home)
	if p := c.Process(map[string]any{"action": "poll", "sessionId": id}); p.Str("state") != "lost" || !strings.Contains(p.Text, "started") {
		t.Fatalf("after restart: %q %v", p.Text, p.D)
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		if left := e2etest.Pgrep(e2etest.Marker(t)); len(left) > 0 {
			return fmt.Sprintf("the command runs on: %v", left)
		}
		return ""
	})
	wantDamage(t, c.Stderr, "meta", filepath.Join(home, "sessions", id, "meta.json"))
}

// TestRetainedBelowRunningRejected: a configuration that keeps fewer
// finished sessions than may run is refused at start with a clear error.
func TestRetainedBelowRunningRejected(t *testing.T) {
	home := e2etest.NewHome(t, `{"quotas":{"maxRunning":10,"maxRetained":5}}`)
	out, err := exec.Command(e2etest.ConchBin, "mcp", "--home", home).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "quotas: maxRetained (5) must be at least maxRunning (10)") {
		t.Fatalf("accepted: %v %s", err, out)
	}
}
