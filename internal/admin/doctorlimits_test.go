package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// TestDoctorSessionLimits: doctor says which session limits this machine
// enforces, as a throw-away session cgroup does (supervisor.ProbeLimits),
// per distinct setting among the agents; warns for each it cannot
// enforce, and when quotas.session turns them all off.
func TestDoctorSessionLimits(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	os.Mkdir(home, 0o700)
	os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"quotas":{"session":{"memoryBytes":1073741824,"pids":100,"cpuWeight":50}},
		"agents":{"free":{"quotas":{"session":{"memoryBytes":0,"pids":0,"cpuWeight":0}}}}}`), 0o600)
	got := findings(home)["containment.session_limits"]
	want := []proto.Limit{{Key: "memoryBytes", Setting: "quotas.session.memoryBytes", Value: 1 << 30},
		{Key: "pids", Setting: "quotas.session.pids", Value: 100}, {Key: "cpuWeight", Setting: "quotas.session.cpuWeight", Value: 50}}
	enforced, warns := supervisor.ProbeLimits(want)
	t.Logf("here: enforced %v, not %v; findings %v", enforced, warns, got)
	var info, off []Finding
	nwarn := 0
	for _, f := range got {
		switch {
		case f.Level == "info":
			info = append(info, f)
		case strings.Contains(f.Message, "agent free"):
			off = append(off, f)
		default:
			nwarn++
		}
	}
	if len(off) != 1 || !strings.Contains(off[0].Message, "no session limits") {
		t.Errorf("the agent with every limit off: %v", off)
	}
	if nwarn != len(warns) {
		t.Errorf("%d warnings for agent main, the probe has %d: %v", nwarn, len(warns), got)
	}
	if len(enforced) > 0 {
		if len(info) != 1 || !strings.Contains(info[0].Message, "agent main") {
			t.Fatalf("info findings %v", info)
		}
		for k := range enforced {
			if !strings.Contains(info[0].Message, k+"=") {
				t.Errorf("%s is enforced but not listed: %s", k, info[0].Message)
			}
		}
		if !strings.Contains(info[0].Message, "cgroup v1") && !strings.Contains(info[0].Message, "cgroup v2") {
			t.Errorf("the hierarchy is not named: %s", info[0].Message)
		}
	}
}
