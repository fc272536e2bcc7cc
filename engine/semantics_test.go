package engine

// In-process tests of the engine's semantics: the policy gate's order,
// approvals, idempotency and quotas. They run real supervisors (this test
// binary, see TestMain) and real shells, in milliseconds to a few
// seconds; the end-to-end tests of cmd/conch cover the same through the
// built binary and its adapters.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/store/ledger"
)

// semEngine is an engine with configuration cfgJSON whose login-shell
// PATH is known from the start (seedLoginCache), so that no answer
// carries the warning of a probe still running on a loaded machine.
func semEngine(t *testing.T, cfgJSON string) *Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	seedLoginCache(home)
	e, err := New(Options{Home: home, Config: cfg, SupervisorArgv: []string{os.Args[0], "supervise"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func details(t *testing.T, r apitype.Result) map[string]any {
	t.Helper()
	b, _ := json.Marshal(r.Details)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func status(t *testing.T, r apitype.Result) string {
	s, _ := details(t, r)["status"].(string)
	return s
}

// waitSession waits (process wait, up to a minute) for a session's end.
func waitSession(t *testing.T, e *Engine, id string) apitype.Result {
	t.Helper()
	ms := 60000.0
	r := e.Process(context.Background(), "main", apitype.ProcessParams{Action: "wait", SessionID: id, Timeout: &ms})
	return r
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestGateDeniesBeforeSpawn: for every configuration whose gate refuses a
// command, the refusal comes before anything runs: the command's side
// effect never happens and no session is left.
func TestGateDeniesBeforeSpawn(t *testing.T) {
	for _, cfg := range []string{
		`{"tools":{"exec":{"host":"gateway","security":"deny"}}}`,
		`{"tools":{"exec":{"host":"gateway","security":"allowlist","ask":"off"}}}`,
		`{"tools":{"exec":{"host":"gateway","security":"allowlist","ask":"on-miss","askFallback":"deny"}}, "agents":{"main":{"tools":{"exec":{"ask":"off"}}}}}`,
	} {
		t.Run(cfg, func(t *testing.T) {
			e := semEngine(t, cfg)
			m := filepath.Join(t.TempDir(), "ran")
			r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "touch " + m})
			if !r.IsError() || !strings.HasPrefix(r.Text, "exec denied") {
				t.Fatalf("not denied: %q %+v", r.Text, details(t, r))
			}
			if exists(m) {
				t.Fatal("the denied command ran")
			}
			if ids := e.Sessions(); len(ids) != 0 {
				t.Fatalf("sessions left: %v", ids)
			}
			if got := ledgerTypes(t, e); got != "evaluate:deny" {
				t.Fatalf("ledger %q, want one evaluate record with outcome deny and no exec", got)
			}
		})
	}
}

// ledgerTypes closes e (which writes out its ledger) and returns the
// ledger's record types in order, an evaluate record with its outcome
// ("evaluate:deny").
func ledgerTypes(t *testing.T, e *Engine) string {
	t.Helper()
	e.Close()
	recs, err := ledger.Tail(e.Home(), 0, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		typ := r.Type
		if m, ok := r.Fields.(map[string]any); ok && typ == ledger.TypeEvaluate {
			typ += ":" + fmt.Sprint(m["outcome"])
		}
		out = append(out, typ)
	}
	return strings.Join(out, " ")
}

// TestGateAskApproval: with ask=always the command waits for a decision
// and runs only once allowed; a denial ends its session without running
// it; a second decision of the same approval is refused.
func TestGateAskApproval(t *testing.T) {
	for _, decision := range []string{"allow-once", "deny"} {
		t.Run(decision, func(t *testing.T) {
			e := semEngine(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"always"}}}`)
			m := filepath.Join(t.TempDir(), "ran")
			r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "touch " + m})
			d, ok := r.Details.(*apitype.ApprovalDetails)
			if !ok || d.Status != "approval-pending" {
				t.Fatalf("not pending: %q", r.Text)
			}
			if exists(m) || !e.Pending("main", d.SessionID) {
				t.Fatal("the command ran before its approval")
			}
			if err := e.DecideApproval(d.ApprovalSlug, decision, "test"); err != nil {
				t.Fatal(err)
			}
			if err := e.DecideApproval(d.ApprovalSlug, "allow-once", "test"); err == nil {
				t.Fatal("a second decision was taken")
			}
			end := waitSession(t, e, d.SessionID)
			st := status(t, end)
			// The ledger tells the same order: the evaluation, the
			// request, the decision, and only after an allow the run.
			want := "evaluate:prompt request decision exec end"
			switch decision {
			case "allow-once":
				if st != "completed" || !exists(m) {
					t.Fatalf("allowed: status %q, ran %v: %q", st, exists(m), end.Text)
				}
			case "deny":
				if exists(m) || st == "completed" {
					t.Fatalf("denied: status %q, ran %v: %q", st, exists(m), end.Text)
				}
				want = "evaluate:prompt request decision end" // no exec
			}
			if got := ledgerTypes(t, e); got != want {
				t.Fatalf("ledger %q, want %q", got, want)
			}
		})
	}
}

// TestIdempotencyThroughEngine: a retry with the same key and request
// runs nothing new and answers with the first call's session; the key for
// another request is a conflict; a failed call frees its key.
func TestIdempotencyThroughEngine(t *testing.T) {
	e := newEngine(t)
	f := filepath.Join(t.TempDir(), "count")
	cmd := "echo x >> " + f + "; echo done"
	p := apitype.ExecParams{Command: cmd, IdempotencyKey: "k1"}
	r1 := e.Exec(context.Background(), "main", p)
	r2 := e.Exec(context.Background(), "main", p)
	if r1.Text != "done" || r2.Text != "done" {
		t.Fatalf("results %q, %q", r1.Text, r2.Text)
	}
	if b, _ := os.ReadFile(f); string(b) != "x\n" {
		t.Fatalf("the command ran %d times", strings.Count(string(b), "x"))
	}
	r3 := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo other", IdempotencyKey: "k1"})
	if d, _ := details(t, r3)["error"].(map[string]any); d["code"] != "idempotency_conflict" {
		t.Fatalf("other request with the key: %q %v", r3.Text, details(t, r3))
	}
	// Another agent's key is its own.
	if r := e.Exec(context.Background(), "other", apitype.ExecParams{Command: "echo other", IdempotencyKey: "k1"}); r.Text != "other" {
		t.Fatalf("agent other: %q", r.Text)
	}
	// A background run: the retry reports the same session.
	yes := true
	bg := apitype.ExecParams{Command: "sleep 30", Background: &yes, IdempotencyKey: "k2"}
	b1 := e.Exec(context.Background(), "main", bg)
	b2 := e.Exec(context.Background(), "main", bg)
	id1, id2 := details(t, b1)["sessionId"], details(t, b2)["sessionId"]
	if id1 == nil || id1 != id2 || status(t, b2) != "running" {
		t.Fatalf("background retry: %v %v %q", id1, id2, b2.Text)
	}
	if n := len(e.Sessions()); n != 1 {
		t.Fatalf("%d sessions for one key", n)
	}
	e.Process(context.Background(), "main", apitype.ProcessParams{Action: "kill", SessionID: id1.(string)})
	// A call refused before it ran (no node host here) leaves nothing to
	// de-duplicate.
	bad := apitype.ExecParams{Command: "true", Host: "node", IdempotencyKey: "k3"}
	if r := e.Exec(context.Background(), "main", bad); !r.IsError() {
		t.Fatalf("host node without a node ran: %q", r.Text)
	}
	if r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo fresh", IdempotencyKey: "k3"}); r.Text != "fresh" {
		t.Fatalf("key of a failed call: %q", r.Text)
	}
}

// TestQuotaMaxRunning: an agent at quotas.maxRunning is refused a new
// exec until one of its sessions ends; other agents are not counted.
func TestQuotaMaxRunning(t *testing.T) {
	e := semEngine(t, `{"quotas":{"maxRunning":1}}`)
	yes := true
	r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "sleep 30", Background: &yes})
	id, _ := details(t, r)["sessionId"].(string)
	if status(t, r) != "running" {
		t.Fatalf("first: %q", r.Text)
	}
	r = e.Exec(context.Background(), "main", apitype.ExecParams{Command: "true"})
	if d, _ := details(t, r)["error"].(map[string]any); d["code"] != "quota_exceeded" {
		t.Fatalf("second while one runs: %q", r.Text)
	}
	if r := e.Exec(context.Background(), "other", apitype.ExecParams{Command: "echo ok"}); r.Text != "ok" {
		t.Fatalf("another agent: %q", r.Text)
	}
	e.Process(context.Background(), "main", apitype.ProcessParams{Action: "kill", SessionID: id})
	waitSession(t, e, id)
	if r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo again"}); r.Text != "again" {
		t.Fatalf("after the first ended: %q", r.Text)
	}
}

// TestQuotaMaxRetained: finished background sessions beyond
// quotas.maxRetained are evicted oldest first (minRetainAgeMs 0: read or
// not), and the agent is told which.
func TestQuotaMaxRetained(t *testing.T) {
	e := semEngine(t, `{"quotas":{"maxRunning":2,"maxRetained":2,"minRetainAgeMs":0}}`)
	yes := true
	var ids []string
	for i := range 4 {
		r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: fmt.Sprintf("echo %d", i), Background: &yes})
		id, _ := details(t, r)["sessionId"].(string)
		waitSession(t, e, id)
		ids = append(ids, id)
	}
	deadline := time.Now().Add(time.Minute)
	for len(e.Sessions()) > 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := e.Sessions()
	if len(got) != 2 || !contains(got, ids[2]) || !contains(got, ids[3]) {
		t.Fatalf("kept %v of %v, want the newest two", got, ids)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// frozenWriter reports whether a thread of this process waits for a
// frozen file system (fsfreeze) to thaw; ok is false when the kernel shows
// no thread's wait channel (then it cannot tell).
func frozenWriter() (blocked, ok bool) {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "wchan"))
		w := strings.TrimSpace(string(b))
		if err != nil || w == "" || w == "0" {
			continue
		}
		ok = true
		if w == "percpu_rwsem_wait" {
			return true, true
		}
	}
	return false, ok
}

// frozenStateDir mounts a small ext4 image at home/state and returns a
// function that freezes it (writes block until the thaw, which cleanup
// does). It skips the test where loop mounts or fsfreeze are unavailable.
func frozenStateDir(t *testing.T, home string) (freeze func()) {
	t.Helper()
	for _, tool := range []string{"mkfs.ext4", "fsfreeze", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	img := filepath.Join(t.TempDir(), "state.img")
	state := filepath.Join(home, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 16<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, state).CombinedOutput(); err != nil {
		t.Skipf("cannot loop-mount an ext4 image (needs root and loop devices): %v %s", err, out)
	}
	os.Chmod(state, 0o700)
	t.Cleanup(func() { exec.Command("umount", "-l", state).Run() })
	return func() {
		if out, err := exec.Command("fsfreeze", "-f", state).CombinedOutput(); err != nil {
			t.Skipf("fsfreeze: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("fsfreeze", "-u", state).Run() })
	}
}

// TestIdempotencyWriteOutsideEngineLock: the idempotency file is written
// while no engine-wide lock is held, so a slow write (here one that blocks:
// the file system of state/ is frozen) holds up only the call whose key
// it records — other calls, and the engine's session table, go on. The
// blocked call still answers only after its key is written.
func TestIdempotencyWriteOutsideEngineLock(t *testing.T) {
	home := t.TempDir()
	freeze := frozenStateDir(t, home)
	seedLoginCache(home)
	e, err := New(Options{Home: home, SupervisorArgv: []string{os.Args[0], "supervise"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	// Thawed (a cleanup registered later runs first) before the engine
	// closes, when the test fails.
	freeze()
	first := make(chan apitype.Result, 1)
	go func() {
		first <- e.Exec(context.Background(), "main", apitype.ExecParams{Command: "true", IdempotencyKey: "k1"})
	}()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		blocked, ok := frozenWriter()
		if blocked {
			break
		}
		if time.Now().After(deadline) {
			if !ok {
				t.Skip("the kernel shows no thread's wait channel: cannot see the blocked write")
			}
			t.Fatal("the idempotency write never blocked on the frozen file system")
		}
		select {
		case r := <-first:
			t.Fatalf("the first call returned before its key was written: %q", r.Text)
		case <-time.After(10 * time.Millisecond):
		}
	}
	others := make(chan apitype.Result, 1)
	go func() {
		e.Sessions()
		others <- e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo other"})
	}()
	select {
	case r := <-others:
		if r.Text != "other" {
			t.Fatalf("other call: %q", r.Text)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("engine calls blocked while the idempotency file was being written")
	}
	select {
	case r := <-first:
		t.Fatalf("the first call returned before its key was written: %q", r.Text)
	default:
	}
	if out, err := exec.Command("fsfreeze", "-u", filepath.Join(home, "state")).CombinedOutput(); err != nil {
		t.Fatalf("thaw: %v %s", err, out)
	}
	if r := <-first; r.Details.(*apitype.ExecDetails).Status != "completed" {
		t.Fatalf("first call: %q", r.Text)
	}
	b, err := os.ReadFile(e.idemPath())
	if err != nil || !strings.Contains(string(b), `"k1"`) {
		t.Fatalf("the key was not written: %v %s", err, b)
	}
}

// TestRestartKeepsKeysAndPool: a new engine on the same home replays a
// key the old one recorded (the command does not run again), and takes
// back the old engine's pooled session directories.
func TestRestartKeepsKeysAndPool(t *testing.T) {
	home := t.TempDir()
	seedLoginCache(home)
	open := func() *Engine {
		e, err := New(Options{Home: home, SupervisorArgv: []string{os.Args[0], "supervise"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	f := filepath.Join(t.TempDir(), "count")
	p := apitype.ExecParams{Command: "echo x >> " + f + "; echo done", IdempotencyKey: "k"}
	e1 := open()
	if r := e1.Exec(context.Background(), "main", p); r.Text != "done" {
		t.Fatalf("first: %q", r.Text)
	}
	// The finished session's directory is emptied and pooled in the
	// background.
	for deadline := time.Now().Add(time.Minute); e1.dirs.Free() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the foreground session's directory was not pooled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	free := e1.dirs.Free()
	e1.Close()
	e2 := open()
	if r := e2.Exec(context.Background(), "main", p); r.Text != "done" {
		t.Fatalf("retry after a restart: %q", r.Text)
	}
	if b, _ := os.ReadFile(f); string(b) != "x\n" {
		t.Fatalf("the command ran %d times", strings.Count(string(b), "x"))
	}
	if got := e2.dirs.Free(); got != free {
		t.Fatalf("the new engine pooled %d directories, the old one left %d", got, free)
	}
}

// TestRetainConcurrentEvictsOnce: retention checks that run at once (one
// starts at every background session's end) evict each session once, with
// one eviction event, and together bring the agent down to the cap.
func TestRetainConcurrentEvictsOnce(t *testing.T) {
	cfg := func(s string) *config.Config {
		c, err := config.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	home := t.TempDir()
	seedLoginCache(home)
	var mu sync.Mutex
	evicted := map[string]int{}
	e, err := New(Options{Home: home, Config: cfg(`{"quotas":{"maxRunning":8,"maxRetained":100}}`), SupervisorArgv: []string{os.Args[0], "supervise"},
		Events: func(ev Event) {
			if ev.Type == "session.evicted" {
				mu.Lock()
				evicted[ev.Data.(map[string]any)["sessionId"].(string)]++
				mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	yes := true
	const n = 6
	for range n {
		r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "true", Background: &yes})
		id, _ := details(t, r)["sessionId"].(string)
		waitSession(t, e, id)
	}
	// The cap drops (a reload): every check now has n-1 sessions to evict.
	e.cfgp.Store(cfg(`{"quotas":{"maxRunning":1,"maxRetained":1,"minRetainAgeMs":0}}`))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); <-start; e.retain("main") }()
	}
	close(start)
	wg.Wait()
	if ids := e.Sessions(); len(ids) != 1 {
		t.Fatalf("kept %v, want one session", ids)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(evicted) != n-1 {
		t.Fatalf("%d sessions evicted, want %d", len(evicted), n-1)
	}
	for id, k := range evicted {
		if k != 1 {
			t.Errorf("session %s evicted %d times", id, k)
		}
	}
}

// TestRetainTruncatedForeground: a foreground run whose output was
// truncated is kept for paging, and counts against quotas.maxRetained as
// a background session does: the oldest go once the agent is over it.
func TestRetainTruncatedForeground(t *testing.T) {
	e := semEngine(t, `{"quotas":{"maxRunning":2,"maxRetained":2,"minRetainAgeMs":0},"tools":{"exec":{"maxOutputChars":1000}}}`)
	var ids []string
	for range 4 {
		r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "seq 1 5000"})
		id, _ := details(t, r)["sessionId"].(string)
		if id == "" {
			t.Fatalf("truncated run not kept: %q", r.Text)
		}
		ids = append(ids, id)
	}
	deadline := time.Now().Add(time.Minute)
	for len(e.Sessions()) > 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := e.Sessions(); len(got) != 2 || !contains(got, ids[2]) || !contains(got, ids[3]) {
		t.Fatalf("kept %v of %v, want the newest two", got, ids)
	}
}
