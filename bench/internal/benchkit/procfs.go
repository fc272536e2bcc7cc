package benchkit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Proc is one process seen in /proc.
type Proc struct {
	PID, PPID int
	// State is the state letter of /proc/<pid>/stat ("R", "S", "Z", …).
	State string
	Argv  []string
}

// FlagValue returns the argument after name in p's argv, or "".
func (p Proc) FlagValue(name string) string {
	for i := 0; i+1 < len(p.Argv); i++ {
		if p.Argv[i] == name {
			return p.Argv[i+1]
		}
	}
	return ""
}

// Processes lists the processes visible in /proc, zombies included.
// Processes that end while the list is read, and those with an empty
// command line (kernel threads, most zombies), are skipped.
func Processes() []Proc {
	ents, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// stat is "pid (comm) state ppid ..."; comm may hold spaces and
		// parentheses, so parse after the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		out = append(out, Proc{PID: pid, PPID: ppid, State: f[0], Argv: argv})
	}
	return out
}

// Filter picks out the conch processes of one home.
type Filter struct {
	// Bin is the argv[0] the processes must have (conch starts its
	// supervisors with its own absolute, symlink-free path); "" matches
	// any.
	Bin string
	// Home is the --home they run on.
	Home string
	// SkipZombies leaves out processes that have exited but are not yet
	// reaped, from the matches and from the children KillSupervisors
	// signals.
	SkipZombies bool
}

// processes is [Processes], without zombies when f.SkipZombies.
func (f Filter) processes() []Proc {
	ps := Processes()
	if !f.SkipZombies {
		return ps
	}
	live := ps[:0]
	for _, p := range ps {
		if p.State != "Z" {
			live = append(live, p)
		}
	}
	return live
}

// Procs returns the processes running subcommand sub ("mcp", "supervise",
// …) of the binary f.Bin on f.Home.
func (f Filter) Procs(sub string) []Proc {
	var out []Proc
	for _, p := range f.processes() {
		if len(p.Argv) >= 2 && f.binary(p.Argv[0]) && p.Argv[1] == sub && p.FlagValue("--home") == f.Home {
			out = append(out, p)
		}
	}
	return out
}

// binary reports whether argv0 is f.Bin or the conch-shim beside it
// (conch starts its supervisors with the shim when there is one).
func (f Filter) binary(argv0 string) bool {
	return f.Bin == "" || argv0 == f.Bin || argv0 == filepath.Join(filepath.Dir(f.Bin), "conch-shim")
}

// Supervisors returns the `conch supervise` processes of f.Home: the
// sessions' supervisors and the engine's warm spare.
func (f Filter) Supervisors() []Proc { return f.Procs("supervise") }

// Sessions counts the live main processes of f.Home's sessions: the
// children of its supervisors (a shared supervisor has many) that have not
// exited.
func (f Filter) Sessions() int {
	isSup := map[int]bool{}
	for _, s := range f.Supervisors() {
		isSup[s.PID] = true
	}
	n := 0
	for _, p := range f.processes() {
		if isSup[p.PPID] && p.State != "Z" {
			n++
		}
	}
	return n
}

// KillSupervisors ends every supervisor of f.Home left running, with the
// process groups of the commands they supervise, and returns how many
// there were. Each command runs in its own process group (or session)
// whose id is its pid, so killing the group also ends its children.
func (f Filter) KillSupervisors() int {
	sups := f.Supervisors()
	if len(sups) == 0 {
		return 0
	}
	isSup := map[int]bool{}
	for _, s := range sups {
		isSup[s.PID] = true
	}
	for _, p := range f.processes() {
		if isSup[p.PPID] {
			syscall.Kill(-p.PID, syscall.SIGKILL)
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	for _, s := range sups {
		syscall.Kill(s.PID, syscall.SIGKILL)
	}
	return len(sups)
}

// StatusKB reads a "Name:   N kB" field of /proc/<pid>/status (VmRSS,
// VmHWM, …).
func StatusKB(pid int, field string) (int64, error) {
	return sumKB(fmt.Sprintf("/proc/%d/status", pid), field)
}

// USSKB is a process's unique set size: the pages only it maps
// (Private_Clean + Private_Dirty of /proc/<pid>/smaps_rollup).
func USSKB(pid int) (int64, error) {
	return sumKB(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Private_Clean", "Private_Dirty")
}

// sumKB adds up the named "Name: N kB" fields of a /proc file.
func sumKB(path string, fields ...string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total int64
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		for _, want := range fields {
			if name == want {
				v := strings.Fields(rest)
				if len(v) == 0 {
					return 0, fmt.Errorf("%s: malformed %s", path, name)
				}
				n, err := strconv.ParseInt(v[0], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%s: %s: %w", path, name, err)
				}
				total += n
				found++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if found != len(fields) {
		return 0, fmt.Errorf("%s: missing %v", path, fields)
	}
	return total, nil
}
