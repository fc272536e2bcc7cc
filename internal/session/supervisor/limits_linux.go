package supervisor

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// enableV2 reports whether the v2 cgroup dir has controller ctl, asking
// its parent to hand it down (cgroup.subtree_control) when it has not.
// The parent can only do that when it holds no process itself (the
// kernel's "no internal processes" rule) and has the controller: a
// supervisor started in a leaf cgroup it shares with other processes
// gets no v2 limits, and the v1 hierarchies are tried instead.
func enableV2(dir, ctl string) bool {
	has := func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		return err == nil && slices.Contains(strings.Fields(string(b)), ctl)
	}
	if has() {
		return true
	}
	os.WriteFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"), []byte("+"+ctl), 0)
	return has()
}

// v1Dirs are the v1 cgroups a session's processes belong in: the
// tracking one and each limit one.
func (c *containment) v1Dirs() []string {
	var out []string
	if c.v1 != "" {
		out = append(out, c.v1)
	}
	for _, d := range c.limits {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out[min(1, len(out)):])
	return out
}

// start starts cmd with its main process born in the session's v1
// cgroups, so nothing it forks runs outside them for a moment: the
// calling goroutine's thread joins those cgroups (v1 moves single
// threads through "tasks"; a fork copies the forking thread's cgroups),
// starts the command, and goes back to the supervisor's own cgroups
// (each session cgroup is made right below them). The thread is locked
// meanwhile; the Go runtime never clones a new thread from a locked one.
// A thread that cannot go back stays locked to this goroutine and ends
// with it. (v2 children are born in their cgroup through
// CLONE_INTO_CGROUP.) Without v1 cgroups it is cmd.Start.
//
// The thread is the caller's rather than a fresh one: handing the start
// to another thread made every command wait for that thread to be
// scheduled, milliseconds on a loaded machine.
//
// The thread names itself "0" (the writing thread), never by its tid: a
// thread that moves itself is the one move the kernel (6.18 here) makes
// without its machine-wide lock of every process's cgroups
// (cgroup_threadgroup_rwsem). Named by its tid, the first move after a
// quiet moment waits for an RCU grace period, 5 to 20 ms here, and every
// command started when the gateway was idle paid it: `exec true` took 9x
// `sh -c true` with the session limits on, 3x without
// (BenchmarkSharedTrueLimits: 5.3x the time without limits, 1.2x now).
func (c *containment) start(cmd *exec.Cmd) error {
	dirs := c.v1Dirs()
	if len(dirs) == 0 {
		return cmd.Start() // the one place conch starts a command
	}
	runtime.LockOSThread()
	self := selfTask
	var joined []string
	var err error
	for _, d := range dirs {
		if err = os.WriteFile(filepath.Join(d, "tasks"), self, 0); err != nil {
			err = fmt.Errorf("join cgroup %s: %w", d, err)
			break
		}
		joined = append(joined, d)
	}
	joinErr := err
	if joinErr == nil {
		err = cmd.Start() // the one place conch starts a command
		c.born = err == nil
	}
	back := true
	for _, d := range joined {
		if os.WriteFile(filepath.Join(filepath.Dir(d), "tasks"), self, 0) != nil {
			back = false
		}
	}
	if back {
		runtime.UnlockOSThread()
	}
	if joinErr == nil {
		return err
	}
	// A cgroup that refuses the thread (removed under us, or a kernel
	// that refuses threads of one process in different cgroups) must not
	// stop the run: start outside and move the child right after.
	if err := cmd.Start(); err != nil { // the one place conch starts a command
		return err
	}
	c.adopt(cmd.Process.Pid)
	c.place([]int{cmd.Process.Pid})
	return nil
}

// selfTask is what a thread writes to a v1 cgroup's "tasks" file to move
// itself there.
var selfTask = []byte("0")

// oomKills is how many processes of the session the kernel's OOM killer
// has killed for its memory limit: memory.events' oom_kill in the v2
// cgroup, memory.oom_control's oom_kill in the v1 memory cgroup.
func (c *containment) oomKills() uint64 {
	var n uint64
	if c.v2 != "" {
		n += keyedCount(filepath.Join(c.v2, "memory.events"), "oom_kill")
	}
	if d := c.limits["memory"]; d != "" {
		n += keyedCount(filepath.Join(d, "memory.oom_control"), "oom_kill")
	}
	return n
}

// pidsRefused is how many forks the session's task limit refused:
// pids.events' max in the v2 cgroup and in the v1 pids cgroup.
func (c *containment) pidsRefused() uint64 {
	var n uint64
	if c.v2 != "" {
		n += keyedCount(filepath.Join(c.v2, "pids.events"), "max")
	}
	if d := c.limits["pids"]; d != "" {
		n += keyedCount(filepath.Join(d, "pids.events"), "max")
	}
	return n
}

// keyedCount reads the value of key from a cgroup file of "key value"
// lines, 0 when it is missing.
func keyedCount(path, key string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == key {
			v, _ := strconv.ParseUint(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// applyLimits sets the spec's limits on the session's cgroups and
// returns meta.json's record of them (nil when none were asked for). A
// sandbox limit that is not enforced is also a warning of the result
// (s.warnings); a session limit only says so in meta.json and in `conch
// doctor`, or every result on a machine without the controllers would
// carry it.
func (s *sup) applyLimits() *proto.LimitsMeta {
	want := s.spec.LimitList()
	if len(want) == 0 {
		return nil
	}
	m := &proto.LimitsMeta{}
	if s.spec.NoCgroup {
		for _, l := range want {
			m.Unenforced = append(m.Unenforced, fmt.Sprintf("Warning: %s is not enforced (cgroups are disabled for this session).", l.Setting))
		}
	} else {
		m.Enforced, m.Unenforced = s.cont.setLimits(fmt.Sprintf("%s-%d", s.spec.ID, os.Getpid()), want)
		s.memLimit = m.Enforced["memoryBytes"]
		s.pidsLimit = m.Enforced["pids"]
	}
	for _, w := range m.Unenforced {
		if strings.HasPrefix(w, "Warning: sandbox.") {
			s.warnings = append(s.warnings, w)
		}
	}
	return m
}

// LimitHierarchy says which cgroup hierarchy a session's limits would be
// set in here, for `conch doctor`: "v2" when the supervisor's v2 cgroup
// hands down memory and pids, else "v1".
func LimitHierarchy() string {
	mounts, own := cgroupMountsOnce(), ownCgroupsOnce()
	if mnt, ok := mounts["cgroup2"]; ok {
		if rel, ok := own[""]; ok {
			b, _ := os.ReadFile(filepath.Join(mnt, rel, "cgroup.controllers"))
			f := strings.Fields(string(b))
			if slices.Contains(f, "memory") && slices.Contains(f, "pids") {
				return "v2"
			}
		}
	}
	return "v1"
}
