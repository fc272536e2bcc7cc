package supervisor

import (
	"fmt"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// needLimit skips unless a session cgroup on this machine can enforce
// the limit (a v2 cgroup with the controller, or a writable v1
// hierarchy), and says which was found.
func needLimit(t *testing.T, l proto.Limit) {
	t.Helper()
	enforced, warns := ProbeLimits([]proto.Limit{l})
	if _, ok := enforced[l.Key]; !ok {
		t.Skipf("%s cannot be enforced here: %v", l.Key, warns)
	}
}

// TestSessionOOMReported: a real process that allocates (and touches)
// 200 MiB in a session limited to 32 MiB is killed by the kernel's OOM
// killer, and the end state says so: killed, killedBy oom, the limit in
// the reason; not a bare SIGKILL (the state before was "signaled").
func TestSessionOOMReported(t *testing.T) {
	needLimit(t, proto.Limit{Key: "memoryBytes", Setting: "quotas.session.memoryBytes", Value: 32 << 20})
	dd, err := exec.LookPath("dd")
	if err != nil {
		t.Skip("no dd")
	}
	h, dir := launch(t, proto.Spec{Argv: []string{dd, "if=/dev/zero", "of=/dev/null", "bs=200M", "count=1"},
		Limits: &proto.Limits{MemoryBytes: 32 << 20, Pids: 64}})
	ex := final(t, h, 60*time.Second)
	t.Logf("end state %s, reason %q", ex.State, ex.Reason)
	if ex.State != proto.StateKilled || ex.KilledBy == nil || *ex.KilledBy != string(proto.KilledByOOM) {
		t.Fatalf("end state %+v, want killed by oom", ex)
	}
	if !strings.Contains(ex.Reason, "out of memory") || !strings.Contains(ex.Reason, fmt.Sprint(32<<20)) {
		t.Fatalf("reason %q does not name the limit", ex.Reason)
	}
	var meta proto.Meta
	if err := fsutil.ReadJSON(proto.MetaPath(dir), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Limits == nil || meta.Limits.Enforced["memoryBytes"] != 32<<20 || meta.Limits.Enforced["pids"] != 64 {
		t.Fatalf("meta.json limits: %+v", meta.Limits)
	}
}

// TestSessionMemoryUnderLimit: the same command under a limit it fits in
// exits 0: the limit is not the kill.
func TestSessionMemoryUnderLimit(t *testing.T) {
	needLimit(t, proto.Limit{Key: "memoryBytes", Setting: "quotas.session.memoryBytes", Value: 512 << 20})
	h, _ := launch(t, proto.Spec{Argv: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=16M", "count=1"},
		Limits: &proto.Limits{MemoryBytes: 512 << 20}})
	if ex := final(t, h, 60*time.Second); ex.State != proto.StateExited || *ex.ExitCode != 0 {
		t.Fatalf("end state %+v", ex)
	}
}

// TestSessionPidsLimit: a session limited to 16 tasks cannot start 40
// background processes; the processes it runs are in the session's limit
// cgroups from the start (the main process reads its own membership).
func TestSessionPidsLimit(t *testing.T) {
	needLimit(t, proto.Limit{Key: "pids", Setting: "quotas.session.pids", Value: 16})
	h, dir := launch(t, proto.Spec{Argv: []string{"/bin/sh", "-c", "cat /proc/self/cgroup; for i in $(seq 40); do sleep 2 & done 2>&1; wait; echo done"},
		Limits: &proto.Limits{Pids: 16, CPUWeight: 50}})
	// The supervisor's thread that started the command went back to the
	// supervisor's own cgroups: none of its threads is in the session's.
	if tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", h.SupervisorPID)); err != nil || len(tasks) == 0 {
		t.Fatalf("supervisor %d threads: %v", h.SupervisorPID, err)
	} else {
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/cgroup", h.SupervisorPID, task.Name()))
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "conch-") && !strings.HasPrefix(l, "0::") {
					t.Errorf("supervisor thread %s stayed in a session cgroup: %s", task.Name(), l)
				}
			}
		}
	}
	ex := final(t, h, 60*time.Second)
	out := output(dir)
	t.Logf("%s", out)
	if !strings.Contains(strings.ToLower(out), "fork") && !strings.Contains(out, "Resource temporarily unavailable") {
		t.Fatalf("40 processes started under pids 16 (%+v): %s", ex, out)
	}
	var meta proto.Meta
	if err := fsutil.ReadJSON(proto.MetaPath(dir), &meta); err != nil {
		t.Fatal(err)
	}
	for ctl, want := range map[string]bool{"pids": true, "cpu": true} {
		if !want {
			continue
		}
		if meta.Limits == nil || len(meta.Limits.Enforced) < 2 {
			t.Fatalf("meta.json limits: %+v", meta.Limits)
		}
		if d := meta.Cgroup.V1[ctl]; d == "" || !strings.Contains(out, ":"+ctl) && !strings.Contains(out, ","+ctl) {
			t.Fatalf("no %s cgroup in meta (%+v) or in the command's /proc/self/cgroup: %s", ctl, meta.Cgroup, out)
		} else if !strings.Contains(out, filepath.Base(d)) {
			t.Fatalf("the command is not in %s: %s", d, out)
		}
	}
}

// TestLimitsV2Files: what the machine here cannot do for real (its cgroup
// v2 hierarchy has no memory, pids or cpu controller), checked on a
// directory laid out like a v2 cgroup: the limits are written to
// memory.max, pids.max and cpu.weight; a controller the cgroup lacks is
// asked of the parent's cgroup.subtree_control; memory.events' oom_kill
// is the OOM count.
func TestLimitsV2Files(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "conch-x")
	os.Mkdir(dir, 0o755)
	for _, f := range []string{"memory.max", "pids.max", "cpu.weight", "cpu.max"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n"), 0o644)
	c := &containment{v2: dir}
	enforced, warns := c.setLimits("x", []proto.Limit{{Key: "memoryBytes", Setting: "quotas.session.memoryBytes", Value: 1 << 30},
		{Key: "pids", Setting: "quotas.session.pids", Value: 4096}, {Key: "cpuWeight", Setting: "quotas.session.cpuWeight", Value: 100}, {Key: "cpus", Setting: "sandbox.limits.cpus", Value: 1.5}})
	if len(warns) != 0 || len(enforced) != 4 {
		t.Fatalf("enforced %v, warnings %v", enforced, warns)
	}
	for f, want := range map[string]string{"memory.max": "1073741824", "pids.max": "4096", "cpu.weight": "100", "cpu.max": "150000 100000"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != want {
			t.Errorf("%s = %q, want %q", f, b, want)
		}
	}
	if n := c.oomKills(); n != 2 {
		t.Errorf("oom kills %d, want 2", n)
	}
	// A cgroup without the memory controller asks its parent for it.
	os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("pids\n"), 0o644)
	os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), nil, 0o644)
	if enableV2(dir, "memory") {
		t.Error("a controller the cgroup does not list is reported as there")
	}
	if b, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control")); string(b) != "+memory" {
		t.Errorf("the parent was asked %q", b)
	}
	if !enableV2(dir, "pids") {
		t.Error("pids is listed")
	}
}

// TestLimitListMerge: a sandbox's limits replace the session's of the
// same kind; the rest stay.
func TestLimitListMerge(t *testing.T) {
	spec := proto.Spec{Limits: &proto.Limits{MemoryBytes: 1 << 30, Pids: 4096, CPUWeight: 100},
		Sandbox: &proto.SandboxSpec{Pids: 512, CPUs: 2}}
	got := map[string]proto.Limit{}
	for _, l := range spec.LimitList() {
		got[l.Key] = l
	}
	if got["pids"].Value != 512 || got["pids"].Setting != "sandbox.limits.pids" || got["memoryBytes"].Value != 1<<30 ||
		got["cpuWeight"].Value != 100 || got["cpus"].Value != 2 || len(got) != 4 {
		t.Fatalf("%+v", got)
	}
}

// TestConcurrentStartsBornInTheirOwnCgroups: sessions started at once on
// many threads (a shared supervisor's) each have their main process born in their own
// v1 limit cgroups and nobody else's, and every starting thread goes back
// to the supervisor's cgroups (a thread moves itself, writing "0").
func TestConcurrentStartsBornInTheirOwnCgroups(t *testing.T) {
	needLimit(t, proto.Limit{Key: "pids", Setting: "quotas.session.pids", Value: 64})
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("born%d-%d", i, os.Getpid())
			c := newCgroup(name)
			defer c.remove()
			if _, warns := c.setLimits(name, []proto.Limit{{Key: "pids", Setting: "quotas.session.pids", Value: 64}}); len(warns) > 0 {
				errs <- fmt.Errorf("%v", warns)
				return
			}
			cmd := exec.Command("cat", "/proc/self/cgroup")
			var out strings.Builder
			cmd.Stdout = &out
			if err := c.start(cmd); err != nil {
				errs <- err
				return
			}
			if err := cmd.Wait(); err != nil {
				errs <- err
				return
			}
			if !c.born {
				errs <- fmt.Errorf("%s: not born in its cgroups", name)
			}
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.Contains(l, "conch-born") && !strings.HasSuffix(l, "/conch-"+name) {
					errs <- fmt.Errorf("%s: child in another session's cgroup: %s", name, l)
				}
			}
			if !strings.Contains(out.String(), ":pids:") || !strings.Contains(out.String(), "/conch-"+name+"\n") {
				errs <- fmt.Errorf("%s: child not in its pids cgroup:\n%s", name, out.String())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/cgroup")
		if strings.Contains(string(b), "conch-born") {
			t.Errorf("thread %s stayed in a session cgroup:\n%s", task.Name(), b)
		}
	}
}
