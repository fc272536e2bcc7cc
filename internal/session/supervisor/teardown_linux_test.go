package supervisor

import (
	"fmt"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sessionCgroups lists the session cgroups of supervisor pid that exist
// under this process's cgroups, in every hierarchy (the shared supervisor's session
// cgroups are made below the shared supervisor's own, which are the test's).
func sessionCgroups(pid int) []string {
	mounts, own := cgroupMountsOnce(), ownCgroupsOnce()
	var out []string
	for ctl, mnt := range mounts {
		rel := own[ctl]
		if ctl == "cgroup2" {
			rel = own[""]
		}
		m, _ := filepath.Glob(filepath.Join(mnt, rel, "conch-*-"+strconv.Itoa(pid)))
		out = append(out, m...)
	}
	return out
}

// TestSharedLeavesNoCgroups: sessions with limits that end every way (by
// themselves, leaving a background child behind, by timeout, by a kill,
// failing to start) leave none of their cgroups behind once their shared supervisor
// has ended them, in any hierarchy.
func TestSharedLeavesNoCgroups(t *testing.T) {
	needLimit(t, proto.Limit{Key: "pids", Setting: "quotas.session.pids", Value: 64})
	h, home := startShared(t)
	lim := &proto.Limits{MemoryBytes: 256 << 20, Pids: 64}
	specs := []proto.Spec{
		{Argv: []string{"/bin/sh", "-c", "true"}},
		{Argv: []string{"/bin/sh", "-c", "echo out; exit 3"}},
		{Argv: []string{"/bin/sh", "-c", "sleep 30 & sleep 30 & echo left"}},
		{Argv: []string{"/bin/sh", "-c", "sleep 30"}, TimeoutMs: 200},
		{Argv: []string{"/bin/sh", "-c", "for i in 1 2 3; do sleep 30 & done; wait"}, TimeoutMs: 300},
	}
	for i, spec := range specs {
		spec.ID = fmt.Sprintf("left%d", i)
		spec.Limits = lim
		hd, err := h.Commit(sharedSpec(home, spec), 10*time.Second)
		if err != nil {
			t.Fatalf("%v: %v", spec.Argv, err)
		}
		if ex := lastExit(hd); ex == nil || !ex.Final {
			t.Fatalf("%v: end %+v", spec.Argv, ex)
		}
	}
	// A start that fails must not leave its cgroups either.
	if _, err := h.Commit(sharedSpec(home, proto.Spec{ID: "leftbad", Argv: []string{"/no/such/program"}, Limits: lim}), 10*time.Second); err == nil {
		t.Fatal("a missing program started")
	}
	pid := h.PID()
	h.Close()
	select {
	case <-h.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the retired host did not exit")
	}
	if left := sessionCgroups(pid); len(left) > 0 {
		t.Fatalf("cgroups left behind: %v", left)
	}
}

// TestSharedRetriesBusyCgroup: a session's limit cgroup that a process
// outside the session's tracking still holds when the session ends
// neither delays the end state nor stays behind: the shared supervisor reports the
// end at once, and removes the cgroup once the process is gone, while
// the shared supervisor lives on.
func TestSharedRetriesBusyCgroup(t *testing.T) {
	needLimit(t, proto.Limit{Key: "pids", Setting: "quotas.session.pids", Value: 64})
	h, home := startShared(t)
	hd, err := h.Commit(sharedSpec(home, proto.Spec{ID: "busy", Argv: []string{"/bin/sh", "-c", "read x"}, Stdin: "open",
		Limits: &proto.Limits{Pids: 64}}), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if hd.Meta == nil || hd.Meta.Cgroup == nil || hd.Meta.Cgroup.V1["pids"] == "" {
		t.Skipf("the session has no v1 pids cgroup here: %+v", hd.Meta)
	}
	dir := hd.Meta.Cgroup.V1["pids"]
	// A process of the test's, in the session's pids cgroup only.
	holder := exec.Command("sleep", "120")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(holder.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	// End the session: its stdin closes, read returns.
	if r, err := Call(hd.Socket, proto.Request{Op: "closeStdin", Session: "busy"}); err != nil || !r.OK {
		t.Fatalf("closeStdin: %+v %v", r, err)
	}
	if ex := lastExit(hd); ex == nil || !ex.Final || ex.State != proto.StateExited {
		t.Fatalf("end %+v", ex)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the held cgroup is gone before its holder: %v", err)
	}
	// The shared supervisor gives up waiting (removeWait) and hands it to its
	// background retry, which it logs.
	log := filepath.Join(home, "run", fmt.Sprintf("supervisor-host-%d.log", h.PID()))
	waitFor(t, "the host's log to name the busy cgroup", func() bool {
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), "cgroup "+dir+" still busy")
	})
	holder.Process.Kill()
	holder.Wait()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still there 60 s after its last process ended; the host (pid %d) lives", dir, h.PID())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if left := sessionCgroups(h.PID()); len(left) > 0 {
		t.Fatalf("cgroups left behind: %v", left)
	}
}
