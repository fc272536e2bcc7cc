package supervisor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"golang.org/x/sys/unix"
)

// containment tracks a session's process tree: the process group of the
// main process, the session cgroup when one could be created, and (always)
// the supervisor's own descendants, which it adopts as child subreaper.
type containment struct {
	pgid int
	// v2 is the session's cgroup v2 directory, or "".
	v2 string
	// v1 is the session's cgroup v1 directory in the pids (or freezer)
	// hierarchy, or "", and v1ctl names that controller.
	v1, v1ctl string
	// limits are the v1 cgroups created only to enforce limits
	// (controller → directory).
	limits map[string]string
	// born: the main process was started inside every v1 cgroup of the
	// session (start), so nothing needs moving there.
	born bool
}

// newCgroup creates the session cgroup conch-<name> under the supervisor's
// own cgroup: v2 if that hierarchy is writable, else v1 pids, else freezer.
// name must be unique on the machine (session ids are only unique within
// a home); an existing directory is never reused, since killing a cgroup
// kills everything in it. It returns an empty containment (process group
// + subreaper only) when no cgroup can be created; that is not an error.
func newCgroup(name string) *containment {
	c := &containment{}
	mounts := cgroupMountsOnce()
	own := ownCgroupsOnce()
	if mnt, ok := mounts["cgroup2"]; ok {
		if rel, ok := own[""]; ok {
			dir := filepath.Join(mnt, rel, "conch-"+name)
			if err := os.Mkdir(dir, 0o755); err == nil {
				if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
					c.v2 = dir
					return c
				}
				os.Remove(dir)
			}
		}
	}
	for _, ctl := range []string{"pids", "freezer"} {
		mnt, ok := mounts[ctl]
		if !ok {
			continue
		}
		rel := own[ctl]
		dir := filepath.Join(mnt, rel, "conch-"+name)
		if err := os.Mkdir(dir, 0o755); err == nil {
			c.v1, c.v1ctl = dir, ctl
			return c
		}
	}
	return c
}

// Describe says which containment is in use, for meta.json.
func (c *containment) describe() *proto.Cgroup {
	if c.v2 == "" && c.v1 == "" {
		return nil
	}
	cg := &proto.Cgroup{V2: c.v2}
	if c.v1 != "" {
		cg.V1 = map[string]string{c.v1ctl: c.v1}
	}
	for ctl, dir := range c.limits {
		if cg.V1 == nil {
			cg.V1 = map[string]string{}
		}
		cg.V1[ctl] = dir
	}
	return cg
}

// cgroupMounts maps "cgroup2" and each v1 controller name to its mount
// point, from /proc/self/mountinfo.
// The process's cgroup mounts and own cgroups, read once: a shared supervisor starts
// many sessions, and neither changes under a running supervisor. (The maps
// are shared: read them only.)
var (
	cgroupMountsOnce = sync.OnceValue(cgroupMounts)
	ownCgroupsOnce   = sync.OnceValue(ownCgroups)
	ownStartTime     = sync.OnceValue(func() uint64 { return StartTime(os.Getpid()) })
)

func cgroupMounts() map[string]string {
	m := map[string]string{}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf := strings.Fields(pre)
		qf := strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		mnt := pf[4]
		switch qf[0] {
		case "cgroup2":
			if _, dup := m["cgroup2"]; !dup {
				m["cgroup2"] = mnt
			}
		case "cgroup":
			for _, opt := range strings.Split(qf[2], ",") {
				if opt == "pids" || opt == "freezer" || opt == "memory" || opt == "cpu" {
					m[opt] = mnt
				}
			}
		}
	}
	return m
}

// ownCgroups maps "" (v2) and each v1 controller to this process's cgroup
// path, from /proc/self/cgroup.
func ownCgroups() map[string]string {
	m := map[string]string{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			m[""] = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			m[ctl] = parts[2]
		}
	}
	return m
}

// cgroupFD opens the v2 cgroup directory for CLONE_INTO_CGROUP, or returns
// -1 when there is none.
func (c *containment) cgroupFD() int {
	if c.v2 == "" {
		return -1
	}
	fd, err := unix.Open(c.v2, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// adopt moves pid into a v1 cgroup (v2 children are started inside their
// cgroup already).
func (c *containment) adopt(pid int) {
	if c.v1 != "" {
		os.WriteFile(filepath.Join(c.v1, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
	}
}

func (c *containment) cgroupDir() string {
	if c.v2 != "" {
		return c.v2
	}
	return c.v1
}

// members lists every live process of the session other than the
// supervisor itself: the cgroup's members plus the supervisor's
// descendants (processes it adopted as subreaper included).
func (c *containment) members() []int {
	seen := map[int]bool{}
	var out []int
	add := func(pid int) {
		if pid > 0 && pid != os.Getpid() && !seen[pid] && !isZombie(pid) {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	if dir := c.cgroupDir(); dir != "" {
		// The cgroup holds the whole tree, setsid and double-forked
		// children included: no need to walk /proc.
		for _, pid := range readPids(filepath.Join(dir, "cgroup.procs")) {
			add(pid)
		}
		return out
	}
	for _, pid := range descendants(os.Getpid()) {
		add(pid)
	}
	return out
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

// killAll ends every member with SIGKILL: cgroup.kill on v2; on v1 forks
// are stopped first (pids.max=0 or FROZEN) so nothing escapes between the
// listing and the signal.
func (c *containment) killAll() {
	switch {
	case c.v2 != "":
		os.WriteFile(filepath.Join(c.v2, "cgroup.kill"), []byte("1"), 0)
	case c.v1ctl == "pids":
		os.WriteFile(filepath.Join(c.v1, "pids.max"), []byte("0"), 0)
		defer os.WriteFile(filepath.Join(c.v1, "pids.max"), []byte("max"), 0)
	case c.v1ctl == "freezer":
		os.WriteFile(filepath.Join(c.v1, "freezer.state"), []byte("FROZEN"), 0)
		defer os.WriteFile(filepath.Join(c.v1, "freezer.state"), []byte("THAWED"), 0)
	}
	for i := 0; i < 50; i++ {
		m := c.members()
		if c.pgid > 0 {
			syscall.Kill(-c.pgid, syscall.SIGKILL)
		}
		if len(m) == 0 {
			return
		}
		for _, pid := range m {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// remove deletes the session cgroups (tracking and limits); they must be
// empty. It runs after the end state is reported. A cgroup still busy
// after removeWait (a process that left the session's tracking cgroup
// but not a limit one keeps it) is handed to leftovers, which retries it
// in the background while the supervisor lives; after that the engine's
// sweep removes it (RemoveEmptyCgroups), since its supervisor is gone.
func (c *containment) remove() {
	dirs := []string{c.v2, c.v1}
	for _, d := range c.limits {
		dirs = append(dirs, d)
	}
	seen := map[string]bool{}
	for _, dir := range dirs {
		if dir == "" || seen[dir] {
			continue
		}
		seen[dir] = true
		if !removeCgroup(dir, removeWait) {
			leftovers.add(dir)
		}
	}
}

// removeWait is how long remove tries a session cgroup before it leaves
// it to leftovers.
const removeWait = 3 * time.Second

// removeCgroup removes the cgroup dir, trying for up to d: after
// cgroup.kill (or SIGKILLs) the members take a moment to exit, longer on
// a loaded machine. It reports whether dir is gone.
func removeCgroup(dir string, d time.Duration) bool {
	wait := 2 * time.Millisecond
	for deadline := time.Now().Add(d); ; {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// leftovers are the session cgroups of this process that remove gave up
// on; they are retried every second at first, then every 30 s, until
// every one is gone.
var leftovers = &cgroupLeftovers{dirs: map[string]bool{}}

type cgroupLeftovers struct {
	mu       sync.Mutex      // guards dirs and retrying
	dirs     map[string]bool // cgroup directories still to remove
	retrying bool            // the retry goroutine runs
}

// add hands dir to the retry, and says so on stderr (a shared supervisor's log, a
// single supervisor's supervisor.log).
func (l *cgroupLeftovers) add(dir string) {
	fmt.Fprintf(os.Stderr, "%s supervisor[%d] cgroup %s still busy %v after its session ended; removing it in the background\n",
		time.Now().UTC().Format(time.RFC3339Nano), os.Getpid(), dir, removeWait)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dirs[dir] = true
	if !l.retrying {
		l.retrying = true
		go l.retry()
	}
}

// retry removes the leftovers until none is left; it is the only
// goroutine that removes them, and it ends when they are gone.
func (l *cgroupLeftovers) retry() {
	wait := time.Second
	for {
		time.Sleep(wait)
		wait = min(2*wait, 30*time.Second)
		l.mu.Lock()
		var dirs []string
		for d := range l.dirs {
			dirs = append(dirs, d)
		}
		l.mu.Unlock()
		var gone []string
		for _, d := range dirs { // not under l.mu: file system calls
			if removeCgroup(d, 0) {
				gone = append(gone, d)
			}
		}
		l.mu.Lock()
		for _, d := range gone {
			delete(l.dirs, d)
		}
		if len(l.dirs) == 0 {
			l.retrying = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}

func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// procStat returns the state letter, parent pid and start time (clock
// ticks since boot) of pid from /proc/<pid>/stat.
func procStat(pid int) (state byte, ppid int, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return 0, 0, 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	ppid, _ = strconv.Atoi(f[1])
	start, _ = strconv.ParseUint(f[19], 10, 64)
	return f[0][0], ppid, start, nil
}

// StartTime returns the start time of pid in clock ticks since boot, used
// with the pid to tell a process from a later one that reuses its number.
func StartTime(pid int) uint64 {
	_, _, st, _ := procStat(pid)
	return st
}

// Alive reports whether pid is a live (not zombie) process started at
// start (0 skips that check).
func Alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	state, _, st, err := procStat(pid)
	if err != nil || state == 'Z' || state == 'X' {
		return false
	}
	return start == 0 || st == start
}

func isZombie(pid int) bool {
	state, _, _, err := procStat(pid)
	return err != nil || state == 'Z' || state == 'X'
}

// descendants lists all processes below root in the process tree.
func descendants(root int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	children := map[int][]int{}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b[i+1:]))
		sc.Split(bufio.ScanWords)
		var ppid int
		for k := 0; k < 2 && sc.Scan(); k++ {
			if k == 1 {
				ppid, _ = strconv.Atoi(sc.Text())
			}
		}
		children[ppid] = append(children[ppid], pid)
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
// cgroup members and its process group. It returns how many processes it
// found. Used by the engine to clean up after a lost supervisor.
func Sweep(m proto.Meta) int {
	c := &containment{pgid: m.PGID}
	if m.Cgroup != nil {
		c.v2 = m.Cgroup.V2
		// The tracking cgroup is pids (else freezer); the others only
		// carry sandbox limits and are removed too.
		for _, ctl := range []string{"pids", "freezer"} {
			if dir, ok := m.Cgroup.V1[ctl]; ok && c.v1 == "" {
				c.v1, c.v1ctl = dir, ctl
			}
		}
		for ctl, dir := range m.Cgroup.V1 {
			if dir != c.v1 {
				if c.limits == nil {
					c.limits = map[string]string{}
				}
				c.limits[ctl] = dir
			}
		}
		if c.v1 == "" && c.v2 == "" {
			for ctl, dir := range c.limits {
				c.v1, c.v1ctl = dir, ctl
				delete(c.limits, ctl)
				break
			}
		}
	}
	var found []int
	if dir := c.cgroupDir(); dir != "" {
		for _, pid := range readPids(filepath.Join(dir, "cgroup.procs")) {
			if !isZombie(pid) {
				found = append(found, pid)
			}
		}
	}
	if m.PGID > 0 && m.PIDStartTime != 0 && Alive(m.PID, m.PIDStartTime) {
		found = append(found, m.PID)
	}
	if c.v2 != "" || c.v1 != "" {
		switch {
		case c.v2 != "":
			os.WriteFile(filepath.Join(c.v2, "cgroup.kill"), []byte("1"), 0)
		default:
			for _, pid := range found {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	// The process group is only ours while its leader is the recorded
	// process: a reused pgid must not be signalled.
	if m.PGID > 0 && Alive(m.PID, m.PIDStartTime) {
		syscall.Kill(-m.PGID, syscall.SIGKILL)
	}
	c.remove()
	return len(found)
}

// SweepSession ends what is left in the cgroups that supervisors made for
// session id under this process's cgroups (a shared supervisor's are its engine's) and
// removes them: for a session whose supervisor died before it wrote
// meta.json, which would name them. Only cgroups whose supervisor (the pid
// in the name, conch-<id>-<pid>) is gone are touched: ids are unique per
// home only, and a live supervisor may serve another home's session of the
// same id.
func SweepSession(id string) int {
	mounts, own := cgroupMountsOnce(), ownCgroupsOnce()
	n := 0
	sweep := func(parent string, m func(dir string) proto.Meta) {
		prefix := "conch-" + id + "-"
		dirs, _ := filepath.Glob(filepath.Join(parent, prefix+"*"))
		for _, d := range dirs {
			// "<id>-<pid>": not the cgroup of a session whose id only
			// starts with this one.
			pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), prefix))
			if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH && !isZombie(pid) {
				continue // not ours, or its supervisor lives
			}
			n += Sweep(m(d))
		}
	}
	if mnt, ok := mounts["cgroup2"]; ok {
		if rel, ok := own[""]; ok {
			sweep(filepath.Join(mnt, rel), func(d string) proto.Meta { return proto.Meta{Cgroup: &proto.Cgroup{V2: d}} })
		}
	}
	// The tracking controllers first: their processes are killed before
	// the limit cgroups are removed.
	ctls := []string{"pids", "freezer"}
	for ctl := range mounts {
		if ctl != "cgroup2" && ctl != "pids" && ctl != "freezer" {
			ctls = append(ctls, ctl)
		}
	}
	for _, ctl := range ctls {
		if mnt, ok := mounts[ctl]; ok {
			sweep(filepath.Join(mnt, own[ctl]), func(d string) proto.Meta {
				return proto.Meta{Cgroup: &proto.Cgroup{V1: map[string]string{ctl: d}}}
			})
		}
	}
	return n
}

// CgroupAvailable reports whether a session cgroup (v2, or v1 pids or
// freezer) can be created under this process's cgroup.
func CgroupAvailable() bool {
	c := newCgroup(fmt.Sprintf("probe-%d", os.Getpid()))
	ok := c.cgroupDir() != ""
	c.remove()
	return ok
}

// setLimits prepares the limits want for the session cgroup name: in the
// v2 session cgroup when it has the controller, else in a conch-<name>
// cgroup of the v1 hierarchy holding it. It returns the limits in force
// (Key → value) and a warning naming the setting of each that cannot be
// enforced. The processes are placed by start (born in the v1 cgroups)
// and place.
func (c *containment) setLimits(name string, want []proto.Limit) (map[string]float64, []string) {
	type file = cgFile
	enforced := map[string]float64{}
	var warns []string
	var mounts, own map[string]string
	for _, l := range want {
		var ctl string
		var v2, v1 []file
		switch l.Key {
		case "memoryBytes":
			n := strconv.FormatInt(int64(l.Value), 10)
			ctl, v2, v1 = "memory", []file{{"memory.max", n}}, []file{{"memory.limit_in_bytes", n}}
		case "pids":
			n := strconv.FormatInt(int64(l.Value), 10)
			ctl, v2, v1 = "pids", []file{{"pids.max", n}}, []file{{"pids.max", n}}
		case "cpus":
			const period = 100000
			quota := int64(l.Value * period)
			ctl = "cpu"
			v2 = []file{{"cpu.max", fmt.Sprintf("%d %d", quota, period)}}
			v1 = []file{{"cpu.cfs_period_us", strconv.Itoa(period)}, {"cpu.cfs_quota_us", strconv.FormatInt(quota, 10)}}
		case "cpuWeight":
			w := min(max(int64(l.Value), 1), 10000)
			ctl = "cpu"
			v2 = []file{{"cpu.weight", strconv.FormatInt(w, 10)}}
			v1 = []file{{"cpu.shares", strconv.FormatInt(max(w*1024/100, 2), 10)}}
		default:
			warns = append(warns, fmt.Sprintf("Warning: %s is not enforced (unknown limit %q).", l.Setting, l.Key))
			continue
		}
		if c.v2 != "" {
			if enableV2(c.v2, ctl) && writeAll(c.v2, v2) == nil {
				enforced[l.Key] = l.Value
				continue
			}
		}
		if mounts == nil {
			mounts, own = cgroupMountsOnce(), ownCgroupsOnce()
		}
		reason := "no writable cgroup holds the " + ctl + " controller"
		if mnt, ok := mounts[ctl]; ok {
			dir := c.limits[ctl]
			if dir == "" && c.v1 != "" && c.v1ctl == ctl {
				dir = c.v1
			}
			if dir == "" {
				d := filepath.Join(mnt, own[ctl], "conch-"+name)
				if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
					reason = fmt.Sprintf("cannot create a %s cgroup: %v", ctl, err)
				} else {
					dir = d
				}
			}
			if dir != "" {
				if c.limits == nil {
					c.limits = map[string]string{}
				}
				c.limits[ctl] = dir
				err := writeAll(dir, v1)
				if err == nil {
					enforced[l.Key] = l.Value
					continue
				}
				reason = fmt.Sprintf("cannot set %s: %v", v1[0].name, err)
			}
		}
		warns = append(warns, fmt.Sprintf("Warning: %s is not enforced (%s).", l.Setting, reason))
	}
	return enforced, warns
}

// cgFile is a cgroup control file and the value to write to it.
type cgFile struct{ name, val string }

// writeAll writes each file of dir in order and stops at the first error.
func writeAll(dir string, files []cgFile) error {
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.val), 0); err != nil {
			return err
		}
	}
	return nil
}

// place moves pids into every v1 limit cgroup.
func (c *containment) place(pids []int) error {
	var errs []error
	for _, dir := range c.limits {
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ProbeLimits reports which of want a session could enforce here: it
// creates a throw-away session cgroup, sets the limits and removes it.
func ProbeLimits(want []proto.Limit) (map[string]float64, []string) {
	name := fmt.Sprintf("probe-%d", os.Getpid())
	c := newCgroup(name)
	defer c.remove()
	return c.setLimits(name, want)
}

// CgroupPids lists the processes of a session's cgroup (v2, else one of
// its v1 cgroups).
func CgroupPids(m proto.Meta) []int {
	if m.Cgroup == nil {
		return nil
	}
	if m.Cgroup.V2 != "" {
		return readPids(filepath.Join(m.Cgroup.V2, "cgroup.procs"))
	}
	for _, dir := range m.Cgroup.V1 {
		return readPids(filepath.Join(dir, "cgroup.procs"))
	}
	return nil
}

// SessionPids lists a session's processes: its cgroup's members, or
// without a cgroup the main process and its descendants.
func SessionPids(m proto.Meta) []int {
	if pids := CgroupPids(m); len(pids) > 0 {
		return pids
	}
	if m.PID <= 0 || !Alive(m.PID, m.PIDStartTime) {
		return nil
	}
	return append([]int{m.PID}, descendants(m.PID)...)
}

// RemoveEmptyCgroups removes the session cgroups (conch-<name>-<pid>)
// under this process's cgroups, in every hierarchy, whose supervisor (the
// pid at the end of the name) is gone and which hold no live process: what
// a sweep that gave up waiting for its members left behind, or what a
// supervisor killed before it cleaned up left empty. A cgroup that still
// holds a process is left to SweepSession, which knows its session. It
// returns how many it removed.
func RemoveEmptyCgroups() int {
	mounts, own := cgroupMountsOnce(), ownCgroupsOnce()
	var parents []string
	if mnt, ok := mounts["cgroup2"]; ok {
		if rel, ok := own[""]; ok {
			parents = append(parents, filepath.Join(mnt, rel))
		}
	}
	for ctl, mnt := range mounts {
		if ctl != "cgroup2" {
			parents = append(parents, filepath.Join(mnt, own[ctl]))
		}
	}
	n := 0
	for _, parent := range parents {
		dirs, _ := filepath.Glob(filepath.Join(parent, "conch-*-*"))
		for _, d := range dirs {
			name := filepath.Base(d)
			pid, err := strconv.Atoi(name[strings.LastIndexByte(name, '-')+1:])
			if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH && !isZombie(pid) {
				continue // not a session cgroup, or its supervisor lives
			}
			live := false
			for _, p := range readPids(filepath.Join(d, "cgroup.procs")) {
				if !isZombie(p) {
					live = true
					break
				}
			}
			if !live && os.Remove(d) == nil {
				n++
			}
		}
	}
	return n
}
