package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/store/ledger"
)

// openHome opens an engine on home (closed at the test's end).
func openHome(t *testing.T, home string) *Engine {
	t.Helper()
	e, err := New(Options{Home: home, SupervisorArgv: []string{os.Args[0], "supervise"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestLedgerEndObservedAfterRestart: sessions that end while no engine
// runs (the engine was closed, as on SIGTERM, while they ran) get their
// ledger end record from the next engine, marked observed, with the end
// state of exit.json; once recorded, later engines do not record it again,
// and verify lists a session as open exactly while it has no end record.
func TestLedgerEndObservedAfterRestart(t *testing.T) {
	home := t.TempDir()
	seedLoginCache(home)
	e1 := openHome(t, home)
	yes := true
	gate := filepath.Join(t.TempDir(), "go")
	var ids []string
	for _, cmd := range []string{"while [ ! -e " + gate + " ]; do sleep 0.02; done; echo done", "while [ ! -e " + gate + " ]; do sleep 0.02; done; exit 3"} {
		r := e1.Exec(context.Background(), "main", apitype.ExecParams{Command: cmd, Background: &yes})
		d, ok := r.Details.(*apitype.ExecDetails)
		if !ok || d.SessionID == "" {
			t.Fatalf("exec: %q %#v", r.Text, r.Details)
		}
		ids = append(ids, d.SessionID)
	}
	e1.Close()
	rep, err := ledger.Verify(home)
	if err != nil || !rep.OK || rep.OpenCount != 2 {
		t.Fatalf("verify while the sessions run: %v %+v (want 2 open)", err, rep)
	}
	// The sessions end while no engine runs.
	os.WriteFile(gate, nil, 0o600)
	for _, id := range ids {
		waitFor(t, id+"'s exit.json", func() bool {
			var ex proto.Exit
			return fsutil.ReadJSON(proto.ExitPath(filepath.Join(home, "sessions", id)), &ex) == nil && ex.Final
		})
	}
	for i := 0; i < 2; i++ {
		openHome(t, home).Close()
	}
	ends := map[string]int{}
	recs, err := ledger.Tail(home, 0, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		m, _ := r.Fields.(map[string]any)
		if r.Type != ledger.TypeEnd {
			continue
		}
		id, _ := m["sessionId"].(string)
		ends[id]++
		if m["observed"] != true || m["state"] != "exited" || m["endedAtMs"] == nil {
			t.Errorf("end record of %s: %v (want observed, exited, endedAtMs)", id, m)
		}
	}
	for _, id := range ids {
		if ends[id] != 1 {
			t.Errorf("session %s: %d end records, want 1", id, ends[id])
		}
	}
	rep, err = ledger.Verify(home)
	if err != nil || !rep.OK || rep.OpenCount != 0 {
		t.Fatalf("verify after the restart: %v %+v (want none open)", err, rep)
	}
}

// approvalEngine is the helper process of TestApprovalAfterKill: an engine
// on home (args: home, config JSON, command) that makes one exec wait for
// approval, prints its session and approval ids, and waits to be killed.
func approvalEngine(args []string) {
	cfg, err := config.Parse([]byte(args[1]))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	e, err := New(Options{Home: args[0], Config: cfg, SupervisorArgv: []string{os.Args[0], "supervise"}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: args[2]})
	d, ok := r.Details.(*apitype.ApprovalDetails)
	if !ok {
		fmt.Println("error", r.Text)
		os.Exit(1)
	}
	fmt.Println(d.SessionID, d.ApprovalID)
	select {}
}

// TestApprovalAfterKill: an engine holding a pending approval is killed
// (SIGKILL). A decision to allow then answers that the run was dropped and
// why (the prepared run died with that engine), never success, for every
// decision; the next engine ends the session denied (approval-dropped),
// tells the agent, records it in the ledger, and the command never runs.
// startApprovalEngine starts this test binary as an engine (mode
// approval-engine or approval-engine-crash, then args) on home, gated with
// ask=always, and returns it with the session and approval ids of the
// command it asked about (its first line).
func startApprovalEngine(t *testing.T, mode, home, command string, args ...string) (*exec.Cmd, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{mode, home,
		`{"tools":{"exec":{"host":"gateway","security":"full","ask":"always"}}}`, command}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q %v", line, err)
	}
	return cmd, f[0], f[1]
}

// An approval reloaded by the next engine before any decision is dropped
// the same way.
func TestApprovalAfterKill(t *testing.T) {
	for _, when := range []string{"decided-while-down", "decided-after-restart"} {
		for _, decision := range []approvals.Decision{approvals.AllowOnce, approvals.AllowAlways, approvals.Deny} {
			t.Run(when+"/"+string(decision), func(t *testing.T) {
				home := t.TempDir()
				seedLoginCache(home)
				marker := filepath.Join(t.TempDir(), "ran")
				cmd, sid, aid := startApprovalEngine(t, "approval-engine", home, "touch "+marker)
				cmd.Process.Signal(syscall.SIGKILL)
				cmd.Wait()

				st, err := approvals.OpenStore(home)
				if err != nil {
					t.Fatal(err)
				}
				var e *Engine
				if when == "decided-after-restart" {
					e = openHome(t, home)
				}
				_, err = st.Decide(aid, decision, "test")
				var dropped *approvals.DroppedError
				if !errors.As(err, &dropped) || !strings.Contains(err.Error(), "nothing ran") {
					t.Fatalf("decision %s after the engine was killed: %v, want the run dropped", decision, err)
				}
				if when == "decided-while-down" {
					if !strings.Contains(err.Error(), "stopped while it was pending") {
						t.Fatalf("the answer does not say why: %v", err)
					}
					e = openHome(t, home)
				} else if !strings.Contains(err.Error(), "restarted while it was pending") {
					t.Fatalf("the answer does not say why: %v", err)
				}
				s := e.lookup("main", sid)
				if s == nil {
					t.Fatalf("session %s not found after the restart", sid)
				}
				waitFor(t, "the session's end", func() bool { return !s.running() })
				_, ex, _ := s.snapshot()
				if ex.State != proto.StateDenied || !strings.HasPrefix(ex.Reason, "approval-dropped (") {
					t.Fatalf("end state %+v, want denied (approval-dropped (…))", ex)
				}
				e.Close()
				if _, err := os.Stat(marker); err == nil {
					t.Fatal("the command ran")
				}
				recs, _ := ledger.Tail(home, 0, ledger.Filter{Approval: aid})
				var types []string
				for _, r := range recs {
					m, _ := r.Fields.(map[string]any)
					types = append(types, r.Type+":"+fmt.Sprint(m["decision"]))
				}
				if got := strings.Join(types, " "); !strings.Contains(got, "decision:dropped") {
					t.Fatalf("ledger %q: no dropped decision", got)
				}
			})
		}
	}
}

// TestOutputLossSameInEveryView: output a full disk kept from the journal
// and that is gone for good (a command killed while its output was held
// back) is reported the same by exec's end, poll, log and list: truncated,
// with the same unrecordedBytes, and the same warning in the texts. (log
// said truncated:false.)
func TestOutputLossSameInEveryView(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	home := filepath.Join(mnt, "home")
	os.MkdirAll(home, 0o700)
	seedLoginCache(home)
	e := openHome(t, home)
	gate := filepath.Join(t.TempDir(), "go")
	yes := true
	r := e.Exec(context.Background(), "main", apitype.ExecParams{Background: &yes,
		Command: "until [ -e " + gate + " ]; do sleep 0.02; done; while :; do echo 0123456789abcdefghijklmnopqrstuvwxyz; done"})
	d, ok := r.Details.(*apitype.ExecDetails)
	if !ok || d.SessionID == "" {
		t.Fatalf("exec: %q", r.Text)
	}
	id := d.SessionID
	// Fill the disk, then let the command print.
	f, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 16<<20)) // short: the disk is full
	f.Close()
	os.WriteFile(gate, nil, 0o600)
	proc := func(p apitype.ProcessParams) apitype.Result {
		p.SessionID = id
		return e.Process(context.Background(), "main", p)
	}
	waitFor(t, "output held back", func() bool {
		return strings.Contains(proc(apitype.ProcessParams{Action: "poll"}).Text, "held back")
	})
	proc(apitype.ProcessParams{Action: "kill"})
	s := e.lookup("main", id)
	waitFor(t, "the end", func() bool { return !s.running() })
	_, ex, _ := s.snapshot()
	if ex.UnrecordedBytes <= 0 {
		t.Fatalf("end state %+v: nothing unrecorded, the test needs some", ex)
	}
	want := apitype.OutputLoss{UnrecordedBytes: ex.UnrecordedBytes, DroppedBytes: ex.DroppedBytes}
	note := fmt.Sprintf("%d bytes of output could not be recorded", ex.UnrecordedBytes)

	pr := proc(apitype.ProcessParams{Action: "poll"})
	if pd := pr.Details.(*apitype.PollDetails); !pd.Truncated || pd.OutputLoss != want || !strings.Contains(pr.Text, note) {
		t.Errorf("poll: %q %+v, want truncated, %+v", pr.Text, pd, want)
	}
	for _, p := range []apitype.ProcessParams{{Action: "log"}, {Action: "log", Offset: new(float64)}} {
		lr := proc(p)
		if ld := lr.Details.(*apitype.LogDetails); !ld.Truncated || ld.OutputLoss != want || !strings.Contains(lr.Text, note) {
			t.Errorf("log: %q %+v, want truncated, %+v", lr.Text[max(0, len(lr.Text)-300):], ld, want)
		}
	}
	lr := e.Process(context.Background(), "main", apitype.ProcessParams{Action: "list"})
	for _, en := range lr.Details.(*apitype.ListDetails).Sessions {
		if en.SessionID == id && (!en.Truncated || en.OutputLoss != want) {
			t.Errorf("list: %+v, want truncated, %+v", en, want)
		}
	}
}

// emfileReport is what the helper of TestOutOfDescriptors saw.
type emfileReport struct {
	Started  int      // sessions started before the first failure
	Codes    []string // error code of each failed exec ("" for none)
	Hosts    []int64  // shared supervisors started, after each failed exec
	HostsMax int64
}

// emfileEngine is the helper process of TestOutOfDescriptors: with its
// descriptor limit (soft and hard, so that the shared supervisors inherit
// it) set to args[1] (0: unchanged) and its supervisors' to args[3] (0:
// theirs), an engine on home args[0] starts background sessions until one
// fails, then tries args[2] more, and prints what it saw.
func emfileEngine(args []string) {
	limit, _ := strconv.Atoi(args[1])
	more, _ := strconv.Atoi(args[2])
	if limit > 0 {
		if err := setDescriptorLimit(limit); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
	}
	argv := []string{os.Args[0], "supervise"}
	if args[3] != "0" {
		argv = []string{os.Args[0], "supervise-limited", args[3]}
	}
	cfg, _ := config.Parse([]byte(`{"sessions":{"survive":false}}`))
	e, err := New(Options{Home: args[0], Config: cfg, SupervisorArgv: argv})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var rep emfileReport
	yes := true
	failed := 0
	for i := 0; i < 2000 && failed <= more; i++ {
		r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "sleep 600", Background: &yes})
		if d, ok := r.Details.(*apitype.ExecDetails); ok && d.SessionID != "" && d.Status == "running" {
			if failed == 0 {
				rep.Started++
			}
			continue
		}
		failed++
		code := ""
		if d, ok := r.Details.(*apitype.ErrorDetails); ok && d.Error != nil {
			code = d.Error.Code
		}
		rep.Codes = append(rep.Codes, code)
		rep.Hosts = append(rep.Hosts, e.pool.SharedStarted())
	}
	rep.HostsMax = e.pool.SharedStarted()
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
	e.StopSessions()
	e.Close()
	os.Exit(0)
}

// TestOutOfDescriptors: with the gateway and its shared supervisors at a low
// descriptor limit, sessions are started until one fails; that failure and
// the next ones carry the code resource_exhausted (they had none), and the
// pool backs off instead of starting a shared supervisor for every failure
// (it started one per failure).
func TestOutOfDescriptors(t *testing.T) {
	for _, tc := range []struct {
		name            string
		engine, hosts   int // descriptor limits (0: unchanged)
		startedSessions bool
	}{
		// The limit is the whole gateway's: each host fills up, a fresh
		// one takes more, until the engine itself runs out.
		{"gateway", 96, 0, true},
		// Every supervisor is too small to hold a session: a fresh host
		// fails at once, and a new one would too.
		{"supervisors", 0, 14, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			seedLoginCache(home)
			const more = 6
			out, err := exec.Command(os.Args[0], "emfile-engine", home, strconv.Itoa(tc.engine), strconv.Itoa(more), strconv.Itoa(tc.hosts)).Output()
			if err != nil {
				t.Fatalf("helper: %v %s", err, out)
			}
			var rep emfileReport
			if err := json.Unmarshal(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\n')+1:], &rep); err != nil {
				t.Fatalf("helper said %s", out)
			}
			t.Logf("%+v", rep)
			if rep.Started == 0 && tc.startedSessions || len(rep.Codes) != more+1 {
				t.Fatalf("report %+v: the test needs sessions started, then %d failures", rep, more+1)
			}
			for i, c := range rep.Codes {
				if c != apitype.CodeResourceExhausted {
					t.Errorf("failure %d: code %q, want %s", i, c, apitype.CodeResourceExhausted)
				}
			}
			// Stopping sessions at the descriptor limit ends every one of
			// them (kills asked all at once failed for lack of sockets and
			// left the commands running behind the gateway).
			ids, _ := os.ReadDir(filepath.Join(home, "sessions"))
			ended := 0
			for _, id := range ids {
				if _, err := os.Stat(proto.ExitPath(filepath.Join(home, "sessions", id.Name()))); err == nil {
					ended++
				}
			}
			if ended < rep.Started {
				t.Errorf("%d sessions started, %d ended when the engine stopped them", rep.Started, ended)
			}
			// One host may be tried per backoff period (1 s,
			// doubling): not one per failure.
			if grew := rep.Hosts[len(rep.Hosts)-1] - rep.Hosts[0]; grew > 2 {
				t.Errorf("%d shared supervisors started over %d failures: %v", grew, more, rep.Hosts)
			}
		})
	}
}
