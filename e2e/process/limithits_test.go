package process

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestLimitHitOnAChildIsReported: with real session limits, a child the
// OOM killer ends at quotas.session.memoryBytes, or forks refused at
// quotas.session.pids, while the shell goes on and exits 0, must not end
// a plain "completed": the result says what the limit did (read from the
// cgroups' event counters), in the foreground exec result and in the
// poll that reports a background run's end. They ended "completed" with
// no mention.
func TestLimitHitOnAChildIsReported(t *testing.T) {
	const mem = 32 << 20
	want := []proto.Limit{{Key: "memoryBytes", Setting: "quotas.session.memoryBytes", Value: mem}, {Key: "pids", Setting: "quotas.session.pids", Value: 16}}
	if enforced, warns := supervisor.ProbeLimits(want); len(enforced) < 2 {
		t.Skipf("memory and pids limits cannot both be enforced here: %v", warns)
	}
	dd, err := exec.LookPath("dd")
	if err != nil {
		t.Skip("no dd")
	}
	home := e2etest.NewHome(t, fmt.Sprintf(`{"quotas":{"session":{"memoryBytes":%d,"pids":16}}}`, mem))
	c := e2etest.StartConch(t, home)
	hits := []struct{ name, command, says string }{
		{"oom", dd + " if=/dev/zero of=/dev/null bs=200M count=1; echo survived", "OOM killer killed 1 process(es)"},
		{"pids", "sh -c 'for i in $(seq 40); do sleep 1 & done; wait' 2>/dev/null; echo survived", "at the session's task limit (16, quotas.session.pids)"},
	}
	for _, h := range hits {
		for _, bg := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/background=%v", h.name, bg), func(t *testing.T) {
				r := c.Exec(map[string]any{"command": h.command, "background": bg})
				if bg {
					r = c.WaitEnd(r.Str("sessionId"), 30*time.Second)
				}
				if !strings.Contains(r.Text, "survived") {
					t.Fatalf("the shell did not go on: %q %v", r.Text, r.D)
				}
				if !strings.Contains(r.Text, h.says) {
					t.Errorf("the result does not say what the limit did (%q): %q", h.says, r.Text)
				}
			})
		}
	}
}
