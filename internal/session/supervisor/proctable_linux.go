package supervisor

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// procTableNow lists the processes of the machine from /proc/<pid>/stat.
// Start is the start time in clock ticks since boot. Linux tracks
// sessions with cgroups and the subreaper; this table serves the tracker
// tests, which run the portable tracker over real processes here.
func procTableNow() ([]procInfo, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	out := make([]procInfo, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue // gone since the listing
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		f := strings.Fields(string(b[i+2:]))
		if len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		start, _ := strconv.ParseUint(f[19], 10, 64)
		out = append(out, procInfo{PID: pid, PPID: ppid, PGID: pgid, Start: start, Zombie: f[0] == "Z" || f[0] == "X"})
	}
	return out, nil
}
