package main

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

// proc is one process seen in /proc.
type proc struct {
	pid, ppid int
	argv      []string
}

// flagValue returns the argument after name in argv, or "".
func (p proc) flagValue(name string) string {
	for i := 0; i+1 < len(p.argv); i++ {
		if p.argv[i] == name {
			return p.argv[i+1]
		}
	}
	return ""
}

// processes lists the processes visible in /proc. Processes that end
// while the list is read are skipped.
func processes() []proc {
	ents, _ := os.ReadDir("/proc")
	var out []proc
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
		out = append(out, proc{pid: pid, ppid: ppid, argv: argv})
	}
	return out
}

// conchProcs returns the processes of the conch binary bin running
// subcommand sub ("mcp" or "supervise") on home.
func conchProcs(bin, sub, home string) []proc {
	var out []proc
	for _, p := range processes() {
		if len(p.argv) >= 2 && p.argv[0] == bin && p.argv[1] == sub && p.flagValue("--home") == home {
			out = append(out, p)
		}
	}
	return out
}

// statusKB reads a "Name:   N kB" field of /proc/<pid>/status.
func statusKB(pid int, field string) (int64, error) {
	return sumKB(fmt.Sprintf("/proc/%d/status", pid), field)
}

// ussKB is a process's unique set size: the pages only it maps
// (Private_Clean + Private_Dirty of /proc/<pid>/smaps_rollup).
func ussKB(pid int) (int64, error) {
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

// killSupervisors ends every supervisor of home left running, with the
// process groups of the commands they supervise, and returns how many
// there were. Each command runs in its own process group (or session)
// whose id is its pid, so killing the group also ends its children.
func killSupervisors(bin, home string) int {
	sups := conchProcs(bin, "supervise", home)
	if len(sups) == 0 {
		return 0
	}
	isSup := map[int]bool{}
	for _, s := range sups {
		isSup[s.pid] = true
	}
	for _, p := range processes() {
		if isSup[p.ppid] {
			syscall.Kill(-p.pid, syscall.SIGKILL)
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	for _, s := range sups {
		syscall.Kill(s.pid, syscall.SIGKILL)
	}
	return len(sups)
}
