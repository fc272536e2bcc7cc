package supervisor

import (
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"
)

// TestPlanJob: the Job Object requested for each limit a spec can ask
// for, alone and together, on machines of 1, 4 and 64 processors.
func TestPlanJob(t *testing.T) {
	base := uint32(jobLimitKillOnJobClose | jobLimitDieOnUnhandledExcept)
	cases := []struct {
		name     string
		want     []proto.Limit
		ncpu     int
		plan     jobPlan
		enforced map[string]float64
		warns    int
	}{
		{"none", nil, 4, jobPlan{LimitFlags: base}, map[string]float64{}, 0},
		{"memory", []proto.Limit{{Key: "memoryBytes", Setting: "quotas.session.memoryBytes", Value: 512 << 20}}, 4,
			jobPlan{LimitFlags: base | jobLimitJobMemory, JobMemoryLimit: 512 << 20}, map[string]float64{"memoryBytes": 512 << 20}, 0},
		{"pids", []proto.Limit{{Key: "pids", Setting: "quotas.session.pids", Value: 64}}, 4,
			jobPlan{LimitFlags: base | jobLimitActiveProcess, ActiveProcessLimit: 64}, map[string]float64{"pids": 64}, 0},
		{"pids beyond uint32", []proto.Limit{{Key: "pids", Setting: "quotas.session.pids", Value: 1e12}}, 4,
			jobPlan{LimitFlags: base | jobLimitActiveProcess, ActiveProcessLimit: 1<<32 - 1}, map[string]float64{"pids": 1e12}, 0},
		{"1.5 cpus of 4", []proto.Limit{{Key: "cpus", Setting: "sandbox.limits.cpus", Value: 1.5}}, 4,
			jobPlan{LimitFlags: base, CPUControlFlags: jobCPURateControlEnable | jobCPURateControlHardCap, CPURate: 3750}, map[string]float64{"cpus": 1.5}, 0},
		{"8 cpus of 4 is all", []proto.Limit{{Key: "cpus", Setting: "sandbox.limits.cpus", Value: 8}}, 4,
			jobPlan{LimitFlags: base, CPUControlFlags: jobCPURateControlEnable | jobCPURateControlHardCap, CPURate: 10000}, map[string]float64{"cpus": 8}, 0},
		{"a sliver of 64 cpus is at least 1", []proto.Limit{{Key: "cpus", Setting: "sandbox.limits.cpus", Value: 0.001}}, 64,
			jobPlan{LimitFlags: base, CPUControlFlags: jobCPURateControlEnable | jobCPURateControlHardCap, CPURate: 1}, map[string]float64{"cpus": 0.001}, 0},
		{"weight 100", []proto.Limit{{Key: "cpuWeight", Setting: "quotas.session.cpuWeight", Value: 100}}, 1,
			jobPlan{LimitFlags: base, CPUControlFlags: jobCPURateControlEnable | jobCPURateControlWeightBased, CPUWeight: 5}, map[string]float64{"cpuWeight": 100}, 0},
		{"cap beats weight", []proto.Limit{{Key: "cpuWeight", Setting: "quotas.session.cpuWeight", Value: 100}, {Key: "cpus", Setting: "sandbox.limits.cpus", Value: 1}}, 2,
			jobPlan{LimitFlags: base, CPUControlFlags: jobCPURateControlEnable | jobCPURateControlHardCap, CPURate: 5000}, map[string]float64{"cpus": 1}, 1},
		{"unknown", []proto.Limit{{Key: "gpus", Setting: "sandbox.limits.gpus", Value: 1}}, 2, jobPlan{LimitFlags: base}, map[string]float64{}, 1},
	}
	for _, c := range cases {
		plan, enforced, warns := planJob(c.want, c.ncpu)
		if plan != c.plan || !reflect.DeepEqual(enforced, c.enforced) || len(warns) != c.warns {
			t.Errorf("%s: plan %+v enforced %v warns %q; want %+v %v %d warnings", c.name, plan, enforced, warns, c.plan, c.enforced, c.warns)
		}
		for _, w := range warns {
			if !strings.HasPrefix(w, "Warning: ") || !strings.Contains(w, c.want[0].Setting) && !strings.Contains(w, "cpuWeight") {
				t.Errorf("%s: warning %q does not name its setting", c.name, w)
			}
		}
	}
}

// TestJobWeight: every cgroup weight maps into 1..9, monotonically, with
// the defaults matched.
func TestJobWeight(t *testing.T) {
	prev := uint32(0)
	for w := 1.0; w <= 10000; w++ {
		got := jobWeight(w)
		if got < 1 || got > 9 || got < prev {
			t.Fatalf("jobWeight(%v) = %d after %d", w, got, prev)
		}
		prev = got
	}
	for w, want := range map[float64]uint32{0: 1, 1: 1, 50: 4, 100: 5, 200: 6, 400: 7, 10000: 9, 1e9: 9} {
		if got := jobWeight(w); got != want {
			t.Errorf("jobWeight(%v) = %d, want %d", w, got, want)
		}
	}
}

func decodeBlock(b []uint16) []string {
	var out []string
	for len(b) > 0 && b[0] != 0 {
		i := 0
		for b[i] != 0 {
			i++
		}
		out = append(out, string(utf16.Decode(b[:i])))
		b = b[i+1:]
	}
	return out
}

// TestEnvBlock: the block CreateProcess gets: one entry per
// case-insensitive name (the last wins), sorted, drive entries kept,
// SYSTEMROOT supplied, non-ASCII text in UTF-16, double-NUL ended.
func TestEnvBlock(t *testing.T) {
	cases := []struct {
		env  []string
		want []string
	}{
		{nil, []string{`SYSTEMROOT=C:\Windows`}},
		{[]string{"Path=a", "PATH=b", "b=1", "A=2"}, []string{"A=2", "b=1", "PATH=b", `SYSTEMROOT=C:\Windows`}},
		{[]string{`=C:=C:\work`, "SystemRoot=D:\\Win", "Z=é€𝄞"}, []string{`=C:=C:\work`, `SystemRoot=D:\Win`, "Z=é€𝄞"}},
		{[]string{"", "NUL=a\x00b", "EMPTY="}, []string{"EMPTY=", `SYSTEMROOT=C:\Windows`}},
	}
	for _, c := range cases {
		b := envBlock(c.env, `C:\Windows`)
		if len(b) < 2 || b[len(b)-1] != 0 || b[len(b)-2] != 0 {
			t.Errorf("%q: block does not end in two NULs: %v", c.env, b)
		}
		if got := decodeBlock(b); !reflect.DeepEqual(got, c.want) {
			t.Errorf("envBlock(%q) = %q, want %q", c.env, got, c.want)
		}
	}
	if b := envBlock(nil, ""); !reflect.DeepEqual(b, []uint16{0, 0}) {
		t.Errorf("empty block %v", b)
	}
}

// TestConsoleSize: defaults, and sizes a COORD cannot hold are clamped.
func TestConsoleSize(t *testing.T) {
	for _, c := range []struct{ cols, rows, x, y int }{{0, 0, 120, 30}, {-1, 5, 120, 5}, {80, 24, 80, 24}, {1 << 20, 70000, 32767, 32767}} {
		if x, y := consoleSize(c.cols, c.rows); int(x) != c.x || int(y) != c.y {
			t.Errorf("consoleSize(%d, %d) = %d×%d, want %d×%d", c.cols, c.rows, x, y, c.x, c.y)
		}
	}
}

// TestWinSignalOf: every signal number 0..64 has a Windows meaning, and
// only the stop requests interrupt and only SIGKILL terminates.
func TestWinSignalOf(t *testing.T) {
	for sig := 0; sig <= 64; sig++ {
		want := winSignalNone
		switch sig {
		case 2, 3, 15:
			want = winSignalInterrupt
		case 9:
			want = winSignalTerminate
		}
		if got := winSignalOf(sig); got != want {
			t.Errorf("winSignalOf(%d) = %v, want %v", sig, got, want)
		}
	}
}
