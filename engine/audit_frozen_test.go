//go:build unix

package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/store/ledger"
)

// TestApprovalDecidedThenEngineKilled: the operator's allow reaches the
// store while the engine that holds the prepared run is alive but has not
// acted on it (frozen here with SIGSTOP), and that engine is then killed.
// The decision answered success; the next engine drops the run, and the
// ledger shows both what the operator decided (by whom) and that the run
// was dropped — it had shown only "dropped by engine", as if nobody had
// approved.
func TestApprovalDecidedThenEngineKilled(t *testing.T) {
	for _, decision := range []approvals.Decision{approvals.AllowOnce, approvals.AllowAlways} {
		t.Run(string(decision), func(t *testing.T) {
			home := t.TempDir()
			seedLoginCache(home)
			marker := filepath.Join(t.TempDir(), "ran")
			cmd, sid, aid := startApprovalEngine(t, "approval-engine", home, "touch "+marker)
			cmd.Process.Signal(syscall.SIGSTOP)
			st, err := approvals.OpenStore(home)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Decide(aid, decision, "operator-x"); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("decision while the engine lives: %v", err)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()

			e := openHome(t, home)
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
			var got []string
			for _, r := range recs {
				if m, ok := r.Fields.(map[string]any); ok && r.Type == ledger.TypeDecision {
					got = append(got, fmt.Sprint(m["decision"], " by ", m["decidedBy"]))
				}
			}
			want := string(decision) + " by operator-x, dropped by engine"
			if strings.Join(got, ", ") != want {
				t.Fatalf("ledger decisions %q, want %q", got, want)
			}
		})
	}
}
