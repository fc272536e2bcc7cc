package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"golang.org/x/sys/windows"
)

// containment holds a session's processes in a Windows Job Object: the
// command is created suspended, assigned to the job and only then
// resumed (spawn_windows.go), so everything it starts is born in the job
// too (no process of a job can leave it: conch never sets
// JOB_OBJECT_LIMIT_BREAKAWAY_OK). Killing the tree is TerminateJobObject;
// the job is created with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE and the
// supervisor holds its only handle, so a supervisor that dies takes the
// session with it. The session limits are the job's limits (planJob).
// Not yet run on Windows.
type containment struct {
	pgid int  // the main process id, which is its console process group
	born bool // the command was started in the job (always, once started)

	job      windows.Handle // 0 until newCgroup
	plan     jobPlan        // the limits set on job
	closeJob sync.Once
	// interrupt sends the console interrupt of winSignalInterrupt (set
	// by launch: Ctrl+C into the pseudoconsole, or Ctrl+Break to the
	// command's process group).
	interrupt func()
}

// newCgroup creates the session's Job Object (a job is not a cgroup, but
// it is this system's container of a process tree). The name is unused:
// an unnamed job cannot be opened by anyone else.
func newCgroup(name string) *containment {
	c := &containment{}
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return c
	}
	c.job = job
	c.plan, _, _ = planJob(nil, runtime.NumCPU())
	if err := c.apply(c.plan); err != nil {
		windows.CloseHandle(job)
		c.job = 0
	}
	return c
}

// errNoJob is the launch error when the session's Job Object could not be
// created: a command is never run uncontained.
var errNoJob = errors.New("no Job Object for the session")

// describe is nil: a job has no path to record (meta.json's cgroup).
func (c *containment) describe() *proto.Cgroup { return nil }

// cgroupDir is "": sessions have no cgroup, so a shared supervisor could
// not tell theirs apart (there are no shared supervisors on Windows).
func (c *containment) cgroupDir() string { return "" }

// adopt does nothing: the command is born in the job.
func (c *containment) adopt(pid int) {}

// jobPidList is JOBOBJECT_BASIC_PROCESS_ID_LIST (winnt.h).
type jobPidList struct {
	Assigned, InList uint32
	IDs              [1]uintptr
}

// members lists the processes of the job (JobObjectBasicProcessIdList):
// all of the session's, the supervisor is not one of them.
func (c *containment) members() []int {
	if c.job == 0 {
		return nil
	}
	off := unsafe.Offsetof(jobPidList{}.IDs)
	n := 64
	for tries := 0; tries < 8; tries++ {
		buf := make([]uintptr, int(off/unsafe.Sizeof(uintptr(0)))+n)
		l := (*jobPidList)(unsafe.Pointer(&buf[0]))
		err := windows.QueryInformationJobObject(c.job, windows.JobObjectBasicProcessIdList, uintptr(unsafe.Pointer(&buf[0])), uint32(len(buf))*uint32(unsafe.Sizeof(uintptr(0))), nil)
		if errors.Is(err, windows.ERROR_MORE_DATA) || err == nil && l.InList < l.Assigned {
			n = int(l.Assigned) + 16
			continue
		}
		if err != nil {
			return nil
		}
		ids := unsafe.Slice((*uintptr)(unsafe.Add(unsafe.Pointer(&buf[0]), off)), l.InList)
		out := make([]int, 0, len(ids))
		for _, id := range ids {
			out = append(out, int(id))
		}
		return out
	}
	return nil
}

// signal does what sig means on Windows (winSignalOf): an interrupt of
// the console, the end of the job, or nothing.
func (c *containment) signal(sig syscall.Signal) {
	switch winSignalOf(int(sig)) {
	case winSignalInterrupt:
		if c.interrupt != nil {
			c.interrupt()
		}
	case winSignalTerminate:
		c.killAll()
	}
}

// killedExitCode is the exit code TerminateJobObject gives every process
// of a killed session (what Windows tools that terminate a process
// report); the session's state says it was killed and by whom.
const killedExitCode = 1

// killAll terminates every process of the job at once: the kernel does
// it, so nothing forks between a listing and the kill.
func (c *containment) killAll() {
	if c.job != 0 {
		windows.TerminateJobObject(c.job, killedExitCode)
	}
}

// remove closes the job; whatever is still in it is killed
// (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE).
func (c *containment) remove() {
	c.closeJob.Do(func() {
		if c.job != 0 {
			windows.CloseHandle(c.job)
		}
	})
}

// jobCPURate is JOBOBJECT_CPU_RATE_CONTROL_INFORMATION (winnt.h): the
// flags, then CpuRate or Weight.
type jobCPURate struct {
	ControlFlags uint32
	Value        uint32
}

// apply sets p on the job.
func (c *containment) apply(p jobPlan) error {
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = p.LimitFlags
	info.BasicLimitInformation.ActiveProcessLimit = p.ActiveProcessLimit
	info.JobMemoryLimit = uintptr(p.JobMemoryLimit)
	if _, err := windows.SetInformationJobObject(c.job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		return fmt.Errorf("set job limits: %w", err)
	}
	if p.CPUControlFlags != 0 {
		rc := jobCPURate{ControlFlags: p.CPUControlFlags, Value: p.CPURate}
		if p.CPUControlFlags&jobCPURateControlWeightBased != 0 {
			rc.Value = p.CPUWeight
		}
		if _, err := windows.SetInformationJobObject(c.job, windows.JobObjectCpuRateControlInformation, uintptr(unsafe.Pointer(&rc)), uint32(unsafe.Sizeof(rc))); err != nil {
			return fmt.Errorf("set job CPU rate: %w", err)
		}
	}
	return nil
}

// setLimits sets the limits want on the job (planJob): it returns those
// in force and a warning naming the setting of each that is not.
func (c *containment) setLimits(name string, want []proto.Limit) (map[string]float64, []string) {
	p, enforced, warns := planJob(want, runtime.NumCPU())
	if c.job == 0 {
		return map[string]float64{}, append(warns, notEnforced(enforced, want, errNoJob)...)
	}
	if err := c.apply(p); err != nil {
		c.apply(c.plan) // kill on close, at least
		return map[string]float64{}, append(warns, notEnforced(enforced, want, err)...)
	}
	c.plan = p
	return enforced, warns
}

// notEnforced is a warning for each limit of enforced, which err kept
// from being set.
func notEnforced(enforced map[string]float64, want []proto.Limit, err error) []string {
	var warns []string
	for _, l := range want {
		if _, ok := enforced[l.Key]; ok {
			warns = append(warns, fmt.Sprintf("Warning: %s is not enforced (%v).", l.Setting, err))
		}
	}
	return warns
}

// start is never called on Windows: the command is created by
// createProcess (spawn_windows.go), suspended, straight into the job.
func (c *containment) start(cmd *exec.Cmd) error {
	return errors.New("containment.start: commands start through createProcess on Windows")
}

// oomKills is 0: a job's memory limit makes allocations fail, it kills
// nothing.
func (c *containment) oomKills() uint64 { return 0 }

// pidsRefused is 0: no task limit is enforced here.
func (c *containment) pidsRefused() uint64 { return 0 }

// applyLimits sets the spec's limits on the job and records them (nil
// when none were asked for); a sandbox limit not in force is also a
// warning of the result.
func (s *sup) applyLimits() *proto.LimitsMeta {
	want := s.spec.LimitList()
	if len(want) == 0 {
		return nil
	}
	m := &proto.LimitsMeta{}
	m.Enforced, m.Unenforced = s.cont.setLimits("", want)
	if v, ok := m.Enforced["memoryBytes"]; ok {
		s.memLimit = v
	}
	for _, w := range m.Unenforced {
		if strings.HasPrefix(w, "Warning: sandbox.") {
			s.warnings = append(s.warnings, w)
		}
	}
	return m
}

// LimitHierarchy names what enforces the session limits here.
func LimitHierarchy() string { return "job object" }

// place does nothing: the processes are born in the job.
func (c *containment) place(pids []int) error { return nil }

var ownStartTime = sync.OnceValue(func() uint64 { return StartTime(os.Getpid()) })

// openProcess opens pid for the queries below.
func openProcess(pid int, access uint32) (windows.Handle, bool) {
	if pid <= 0 {
		return 0, false
	}
	h, err := windows.OpenProcess(access, false, uint32(pid))
	return h, err == nil
}

// StartTime returns the creation time of pid in microseconds since the
// epoch (0 if it is gone), used with the pid to tell a process from a
// later one that reuses its number (Windows reuses them soon).
func StartTime(pid int) uint64 {
	h, ok := openProcess(pid, windows.PROCESS_QUERY_LIMITED_INFORMATION)
	if !ok {
		return 0
	}
	defer windows.CloseHandle(h)
	var created, exited, kernel, user windows.Filetime
	if windows.GetProcessTimes(h, &created, &exited, &kernel, &user) != nil {
		return 0
	}
	return uint64(created.Nanoseconds() / 1000)
}

// stillActive is GetExitCodeProcess's code of a running process.
const stillActive = 259

// Alive reports whether pid is a running process started at start (0
// skips that check). A process that has exited but whose handle someone
// still holds is not alive.
func Alive(pid int, start uint64) bool {
	h, ok := openProcess(pid, windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.SYNCHRONIZE)
	if !ok {
		return false
	}
	defer windows.CloseHandle(h)
	if ev, err := windows.WaitForSingleObject(h, 0); err != nil || ev != uint32(windows.WAIT_TIMEOUT) {
		return false
	}
	return start == 0 || StartTime(pid) == start
}

func isZombie(pid int) bool { return !Alive(pid, 0) }

// descendants lists the processes below root, from a Toolhelp snapshot
// of the parent links. Windows keeps a dead parent's id in its children
// and reuses ids: a child created before its supposed parent is not its
// child.
func descendants(root int) []int {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil
	}
	defer windows.CloseHandle(snap)
	children := map[int][]int{}
	var e windows.ProcessEntry32
	e.Size = uint32(unsafe.Sizeof(e))
	for err := windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		if e.ProcessID != 0 && e.ProcessID != e.ParentProcessID {
			children[int(e.ParentProcessID)] = append(children[int(e.ParentProcessID)], int(e.ProcessID))
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		ps := StartTime(p)
		for _, c := range children[p] {
			if cs := StartTime(c); cs == 0 || cs < ps {
				continue
			}
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// Sweep kills what is left of a session whose supervisor is gone. Its
// job died with the supervisor (kill on job close), so normally nothing
// is; a main process still alive (the recorded one, not a reuse of its
// id) and its descendants are terminated. It returns how many it found.
func Sweep(m proto.Meta) int {
	if m.PIDStartTime == 0 || !Alive(m.PID, m.PIDStartTime) {
		return 0
	}
	n := 0
	for _, pid := range append(descendants(m.PID), m.PID) {
		if h, ok := openProcess(pid, windows.PROCESS_TERMINATE); ok {
			if windows.TerminateProcess(h, killedExitCode) == nil {
				n++
			}
			windows.CloseHandle(h)
		}
	}
	return n
}

// SweepSession finds nothing: it sweeps cgroups, which Windows lacks.
func SweepSession(id string) int { return 0 }

// CgroupAvailable is false: Windows has no cgroups (so no supervisor
// shared supervisors: DefaultShared).
func CgroupAvailable() bool { return false }

// ProbeLimits reports which limits a session's job would enforce.
func ProbeLimits(want []proto.Limit) (map[string]float64, []string) {
	_, enforced, warns := planJob(want, runtime.NumCPU())
	return enforced, warns
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
