package supervisor

import (
	"fmt"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// trackEvery is how often the tracker scans while a session runs, so that
// a member is remembered before its parent exits and it is reparented.
const trackEvery = 500 * time.Millisecond

// containment tracks a session's process tree on macOS, which has no
// cgroups and no child subreaper: the process group of the main process
// plus a tracker over sysctl snapshots (see tracker for what it cannot
// see). Not yet run on macOS.
type containment struct {
	pgid int
	// born is never set on macOS: the command is not started inside
	// cgroups, so spawn adopts it.
	born bool

	t        *tracker // set by adopt
	stop     chan struct{}
	stopOnce sync.Once
}

// newCgroup returns a containment without a cgroup: macOS has none.
func newCgroup(name string) *containment { return &containment{} }

// describe is nil: no cgroup is in use.
func (c *containment) describe() *proto.Cgroup { return nil }

func (c *containment) cgroupDir() string { return "" }

// adopt starts tracking the session from its main process pid (the
// process group leader): a scan every trackEvery until remove.
func (c *containment) adopt(pid int) {
	c.t = newTracker(os.Getpid(), procTableNow)
	c.t.setGroup(c.pgid)
	c.stop = make(chan struct{})
	c.t.scan()
	go func() {
		tick := time.NewTicker(trackEvery)
		defer tick.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-tick.C:
				c.t.scan()
			}
		}
	}()
}

// members lists every live process of the session other than the
// supervisor itself.
func (c *containment) members() []int {
	if c.t == nil {
		return nil
	}
	return c.t.members()
}

// signal sends sig to the process group and to every member.
func (c *containment) signal(sig syscall.Signal) {
	if c.pgid > 0 {
		syscall.Kill(-c.pgid, sig)
	}
	for _, pid := range c.members() {
		syscall.Kill(pid, sig)
	}
}

// killAll ends every member with SIGKILL, stopping them first so that
// nothing forks between a scan and the signal.
func (c *containment) killAll() {
	if c.t == nil {
		if c.pgid > 0 {
			syscall.Kill(-c.pgid, syscall.SIGKILL)
		}
		return
	}
	c.t.killTree(syscall.Kill, 50)
}

// remove stops the tracker.
func (c *containment) remove() {
	if c.stop != nil {
		c.stopOnce.Do(func() { close(c.stop) })
	}
}

// setLimits enforces nothing: the limits need cgroups. Each limit asked
// for gets a warning naming its setting.
func (c *containment) setLimits(name string, want []proto.Limit) (map[string]float64, []string) {
	var warns []string
	for _, l := range want {
		warns = append(warns, fmt.Sprintf("Warning: %s is not enforced (macOS has no cgroups).", l.Setting))
	}
	return map[string]float64{}, warns
}

// start starts cmd: there are no cgroups to start it in.
func (c *containment) start(cmd *exec.Cmd) error {
	return cmd.Start() // the one place conch starts a command
}

// oomKills is 0: no memory limit is enforced, so no OOM kill is ours.
func (c *containment) oomKills() uint64 { return 0 }

// pidsRefused is 0: no task limit is enforced.
func (c *containment) pidsRefused() uint64 { return 0 }

// applyLimits records the spec's limits as not enforced (nil when none
// were asked for); a sandbox limit is also a warning of the result.
func (s *sup) applyLimits() *proto.LimitsMeta {
	want := s.spec.LimitList()
	if len(want) == 0 {
		return nil
	}
	m := &proto.LimitsMeta{}
	_, m.Unenforced = s.cont.setLimits("", want)
	for _, w := range m.Unenforced {
		if strings.HasPrefix(w, "Warning: sandbox.") {
			s.warnings = append(s.warnings, w)
		}
	}
	return m
}

// LimitHierarchy is "none": macOS has no cgroups.
func LimitHierarchy() string { return "none" }

// place does nothing: there are no limit cgroups.
func (c *containment) place(pids []int) error { return nil }

var ownStartTime = sync.OnceValue(func() uint64 { return StartTime(os.Getpid()) })

// StartTime returns the start time of pid in microseconds since the
// epoch (0 if it is gone), used with the pid to tell a process from a
// later one that reuses its number.
func StartTime(pid int) uint64 {
	p, ok := procOf(pid)
	if !ok {
		return 0
	}
	return p.Start
}

// Alive reports whether pid is a live (not zombie) process started at
// start (0 skips that check).
func Alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	p, ok := procOf(pid)
	if !ok || p.Zombie {
		return false
	}
	return start == 0 || p.Start == start
}

func isZombie(pid int) bool {
	p, ok := procOf(pid)
	return !ok || p.Zombie
}

// descendants lists all processes below root in the process tree.
func descendants(root int) []int {
	procs, err := procTableNow()
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// Sweep kills what is left of a session whose supervisor is gone: its
// process group, while its leader is the recorded process (a reused pgid
// must not be signalled). Members that left the group are lost with the
// supervisor's tracker. It returns how many processes it found.
func Sweep(m proto.Meta) int {
	if m.PGID <= 0 || m.PIDStartTime == 0 || !Alive(m.PID, m.PIDStartTime) {
		return 0
	}
	n := 0
	if procs, err := procTableNow(); err == nil {
		for _, p := range procs {
			if p.PGID == m.PGID && !p.Zombie {
				n++
			}
		}
	}
	syscall.Kill(-m.PGID, syscall.SIGKILL)
	return n
}

// SweepSession finds nothing: it sweeps cgroups, which macOS lacks.
func SweepSession(id string) int { return 0 }

// CgroupAvailable is false: macOS has no cgroups.
func CgroupAvailable() bool { return false }

// ProbeLimits reports that no limit can be enforced here.
func ProbeLimits(want []proto.Limit) (map[string]float64, []string) {
	return (&containment{}).setLimits("", want)
}

// CgroupPids is nil: there are no session cgroups.
func CgroupPids(m proto.Meta) []int { return nil }

// SessionPids lists a session's processes: the main process and its
// descendants.
func SessionPids(m proto.Meta) []int {
	if m.PID <= 0 || !Alive(m.PID, m.PIDStartTime) {
		return nil
	}
	return append([]int{m.PID}, descendants(m.PID)...)
}

// RemoveEmptyCgroups removes nothing: there are no session cgroups.
func RemoveEmptyCgroups() int { return 0 }
