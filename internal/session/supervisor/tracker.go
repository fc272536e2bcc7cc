//go:build unix

package supervisor

import (
	"sync"
	"syscall"
	"time"
)

// pauseBetweenKills lets SIGKILLed members exit before the next scan.
var pauseBetweenKills = func() { time.Sleep(2 * time.Millisecond) }

// procInfo is one process of a process-table snapshot.
type procInfo struct {
	PID, PPID, PGID int
	// Start is the process's start time in the OS's own unit; with PID
	// it names one process, so that a reused pid is never taken for a
	// member.
	Start  uint64
	Zombie bool
}

// procTable takes a snapshot of the processes this user can see. Each OS
// has one (procTableNow); tests use fakes.
type procTable func() ([]procInfo, error)

// tracker finds a session's processes where no cgroup (and no child
// subreaper) holds them: on macOS. It remembers every member it has seen
// by pid and start time, so that a member whose parent exited (and which
// was reparented to launchd) stays a member, and so do the processes it
// starts later. Members are found three ways on each scan: children (by
// parent pid) of the supervisor and of every member seen before, and
// every process in the session's process group.
//
// What it cannot see: a process that forks a child which forks again and
// leaves the process group (setsid), when the intermediate process exits
// before any scan has seen it. Nothing recorded links the survivor back.
// Scans run at each kill and every trackEvery while the session runs;
// kqueue NOTE_FORK and libproc's birth-parent unique ids would narrow the
// window (not done: they need a Mac to be verified).
//
// The zero tracker is not usable; a tracker is safe for concurrent use.
type tracker struct {
	self  int // the supervisor: never a member
	table procTable

	mu   sync.Mutex     // guards the fields below
	pgid int            // the session's process group; 0 before the start
	seen map[int]uint64 // pid → start time of every member seen
}

func newTracker(self int, table procTable) *tracker {
	return &tracker{self: self, table: table, seen: map[int]uint64{}}
}

// setGroup records the session's process group (the main process's pid).
func (t *tracker) setGroup(pgid int) {
	t.mu.Lock()
	t.pgid = pgid
	t.mu.Unlock()
}

// scan takes a snapshot and returns the live members. A remembered pid
// whose start time changed was reused by another process: it is
// forgotten, and its children are not followed.
func (t *tracker) scan() []procInfo {
	procs, err := t.table()
	if err != nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	byPID := make(map[int]procInfo, len(procs))
	children := map[int][]int{}
	for _, p := range procs {
		byPID[p.PID] = p
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	member := map[int]bool{}
	var queue []int
	add := func(pid int) {
		if pid <= 0 || pid == t.self || member[pid] {
			return
		}
		member[pid] = true
		queue = append(queue, pid)
	}
	for pid, start := range t.seen {
		if p, ok := byPID[pid]; ok && p.Start == start {
			add(pid)
		} else {
			delete(t.seen, pid)
		}
	}
	if t.pgid > 0 {
		for _, p := range procs {
			if p.PGID == t.pgid {
				add(p.PID)
			}
		}
	}
	for _, c := range children[t.self] {
		add(c)
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			add(c)
		}
	}
	var out []procInfo
	for pid := range member {
		p := byPID[pid]
		t.seen[pid] = p.Start
		if !p.Zombie {
			out = append(out, p)
		}
	}
	return out
}

// members lists the pids of the live members.
func (t *tracker) members() []int {
	var out []int
	for _, p := range t.scan() {
		out = append(out, p.PID)
	}
	return out
}

// group is the session's process group, or 0.
func (t *tracker) group() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pgid
}

// killTree ends every member without a cgroup to freeze: it stops them
// all (a stopped process cannot fork), scans again and stops the new
// ones until a scan finds none (bounded by rounds), then sends SIGKILL to
// all of them and repeats until no member is left. kill is the signal
// call (syscall.Kill outside tests); a negative pid names a group.
func (t *tracker) killTree(kill func(pid int, sig syscall.Signal) error, rounds int) {
	pgid := t.group()
	stopped := map[int]bool{}
	for i := 0; i < rounds; i++ {
		if pgid > 0 {
			kill(-pgid, syscall.SIGSTOP)
		}
		fresh := 0
		for _, pid := range t.members() {
			if !stopped[pid] {
				stopped[pid] = true
				fresh++
				kill(pid, syscall.SIGSTOP)
			}
		}
		if fresh == 0 {
			break
		}
	}
	for i := 0; i < rounds; i++ {
		if pgid > 0 {
			kill(-pgid, syscall.SIGKILL)
		}
		m := t.members()
		if len(m) == 0 {
			return
		}
		for _, pid := range m {
			kill(pid, syscall.SIGKILL)
		}
		pauseBetweenKills()
	}
}
