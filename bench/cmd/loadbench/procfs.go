package main

import (
	"bytes"
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

// processes lists the processes visible in /proc; those that end while the
// list is read are skipped.
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
		// "pid (comm) state ppid ...": comm may hold spaces, parse after the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		out = append(out, proc{pid: pid, ppid: ppid, argv: argv})
	}
	return out
}

// supervisors returns the live `conch supervise --home home` processes
// (the sessions' supervisors and the engine's warm spare).
func supervisors(home string) []proc {
	var out []proc
	for _, p := range processes() {
		if len(p.argv) < 2 || p.argv[1] != "supervise" {
			continue
		}
		for i := 2; i+1 < len(p.argv); i++ {
			if p.argv[i] == "--home" && p.argv[i+1] == home {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// killSupervisors ends every supervisor of home still running, with the
// process groups of the commands they supervise, and returns how many
// there were.
func killSupervisors(home string) int {
	sups := supervisors(home)
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
