package process

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestSessionLimitsThroughConch: through the real binary, a gateway
// command that allocates past quotas.session.memoryBytes ends killed by
// the OOM killer and is reported so (state killed, killedBy oom, the
// limit in the text and the reason), one that forks past
// quotas.session.pids cannot, and `conch doctor` names the limits this
// machine enforces. On the code before session limits the allocation
// ran to its end (exit 0) and the forks all started.
func TestSessionLimitsThroughConch(t *testing.T) {
	const mem = 32 << 20
	want := []proto.Limit{{Key: "memoryBytes", Setting: "quotas.session.memoryBytes", Value: mem}, {Key: "pids", Setting: "quotas.session.pids", Value: 16}}
	if enforced, warns := supervisor.ProbeLimits(want); len(enforced) < 2 {
		t.Skipf("memory and pids limits cannot both be enforced here: %v", warns)
	}
	t.Parallel()
	dd, err := exec.LookPath("dd")
	if err != nil {
		t.Skip("no dd")
	}
	home := e2etest.NewHome(t, fmt.Sprintf(`{"quotas":{"session":{"memoryBytes":%d,"pids":16}}}`, mem))
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": dd + " if=/dev/zero of=/dev/null bs=200M count=1"})
	t.Logf("%s %v", r.Text, r.D)
	if r.Str("state") != "killed" || r.Str("killedBy") != "oom" || !strings.Contains(r.Text, "out of memory") || !strings.Contains(r.Text, fmt.Sprint(mem)) {
		t.Fatalf("want killed by oom with the limit: %q %v", r.Text, r.D)
	}
	r = c.Exec(map[string]any{"command": "for i in $(seq 40); do sleep 2 & done; wait; echo done"})
	if !strings.Contains(strings.ToLower(r.Text), "fork") && !strings.Contains(r.Text, "Resource temporarily unavailable") {
		t.Fatalf("40 processes under pids 16: %q", r.Text)
	}
	out, _ := exec.Command(e2etest.ConchBin, "doctor", "--home", home).CombinedOutput()
	if !strings.Contains(string(out), "containment.session_limits") || !strings.Contains(string(out), fmt.Sprintf("memoryBytes=%d", mem)) {
		t.Fatalf("doctor does not state the session limits: %s", out)
	}
}
