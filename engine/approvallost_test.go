package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/store/ledger"
)

// approvalEngineCrash is approvalEngine that kills itself (SIGKILL) at
// one step of an approved run's start (approvedStep): args are the home,
// the config, the command and the step.
func approvalEngineCrash(args []string) {
	at := args[3]
	approvedStep = func(step string) {
		if step == at {
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				p.Kill() // SIGKILL: nothing of the engine runs on
			}
			select {}
		}
	}
	approvalEngine(args[:3])
}

// approvedRunSteps are the steps of an approved run's start, in order
// (approvedStep's names).
var approvedRunSteps = []string{"recorded", "consumed", "marked"}

// decisionsOf lists the ledger's decisions on approval aid as
// "<decision> by <who>".
func decisionsOf(home, aid string) string {
	recs, _ := ledger.Tail(home, 0, ledger.Filter{Approval: aid})
	var got []string
	for _, r := range recs {
		if m, ok := r.Fields.(map[string]any); ok && r.Type == ledger.TypeDecision {
			got = append(got, fmt.Sprint(m["decision"], " by ", m["decidedBy"]))
		}
	}
	return strings.Join(got, ", ")
}

// TestApprovedRunLostBeforeStart: the engine holding an approved run
// dies (SIGKILL) at each step between the decision and the start. The
// next engine must end the session saying what happened: approved, by
// whom, and the start lost (it said approval-timeout after the approval
// was consumed, and deleted the session without a word once its state
// was marked); the ledger shows the decision once, then the run dropped;
// the command never runs.
func TestApprovedRunLostBeforeStart(t *testing.T) {
	for _, step := range approvedRunSteps {
		t.Run(step, func(t *testing.T) {
			home := t.TempDir()
			seedLoginCache(home)
			marker := filepath.Join(t.TempDir(), "ran")
			cmd, sid, aid := startApprovalEngine(t, "approval-engine-crash", home, "touch "+marker, step)
			st, err := approvals.OpenStore(home)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Decide(aid, approvals.AllowOnce, "operator-x"); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal(err)
			}
			cmd.Wait() // it kills itself at the step
			e := openHome(t, home)
			s := e.lookup("main", sid)
			if s == nil {
				t.Fatalf("session %s gone after the restart: the agent cannot learn what became of its approved run", sid)
			}
			waitFor(t, "the session's end", func() bool { return !s.running() })
			_, ex, _ := s.snapshot()
			if ex.State != proto.StateDenied || !strings.Contains(ex.Reason, "approved (allow-once by operator-x)") || strings.Contains(ex.Reason, "timeout") {
				t.Errorf("end state %s %q, want denied saying it was approved (allow-once by operator-x) and the start lost", ex.State, ex.Reason)
			}
			e.Close()
			if _, err := os.Stat(marker); err == nil {
				t.Error("the command ran")
			}
			if got, want := decisionsOf(home, aid), "allow-once by operator-x, dropped by engine"; got != want {
				t.Errorf("ledger decisions %q, want %q", got, want)
			}
		})
	}
}

// TestApprovedRunStartFails: an approved run whose supervisor cannot
// start ends saying it was approved and that the start failed, and the
// ledger says the run was dropped after the decision.
func TestApprovedRunStartFails(t *testing.T) {
	home := t.TempDir()
	seedLoginCache(home)
	cfg, err := config.Parse([]byte(`{"tools":{"exec":{"host":"gateway","security":"full","ask":"always"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Home: home, Config: cfg, SupervisorArgv: []string{"/bin/false"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "true"})
	d, ok := r.Details.(*apitype.ApprovalDetails)
	if !ok {
		t.Fatalf("not an approval: %q", r.Text)
	}
	if err := e.DecideApproval(d.ApprovalID, "allow-once", "operator-x"); err != nil {
		t.Fatal(err)
	}
	s := e.lookup("main", d.SessionID)
	waitFor(t, "the session's end", func() bool { return !s.running() })
	_, ex, _ := s.snapshot()
	if ex.State != proto.StateDenied || !strings.HasPrefix(ex.Reason, "spawn-failed (approved (allow-once by operator-x); the start failed: ") {
		t.Errorf("end state %s %q, want denied spawn-failed (approved (allow-once by operator-x); the start failed: …)", ex.State, ex.Reason)
	}
	e.Close() // the ledger's appends are flushed
	if got, want := decisionsOf(home, d.ApprovalID), "allow-once by operator-x, dropped by engine"; got != want {
		t.Errorf("ledger decisions %q, want %q", got, want)
	}
}
