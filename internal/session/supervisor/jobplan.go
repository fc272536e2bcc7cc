package supervisor

import (
	"fmt"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"math"
	"slices"
	"strings"
	"unicode/utf16"
)

// The pure parts of the Windows supervisor (contain_windows.go,
// spawn_windows.go): what a session's Job Object is asked to enforce,
// the environment block CreateProcess takes, the pseudoconsole size and
// what each signal means there. They are plain Go over plain values so
// that their tests run on every system.

// Job Object limit flags and CPU rate control flags (winnt.h).
const (
	jobLimitActiveProcess            = 0x00000008
	jobLimitJobMemory                = 0x00000200
	jobLimitDieOnUnhandledExcept     = 0x00000400
	jobLimitKillOnJobClose           = 0x00002000
	jobCPURateControlEnable          = 0x1
	jobCPURateControlWeightBased     = 0x2
	jobCPURateControlHardCap         = 0x4
	jobCPURateMax                    = 10000 // CpuRate of all processors: 100 % in hundredths
	jobCPUWeightMin, jobCPUWeightMax = 1, 9
)

// jobPlan is what a session's Job Object is asked to enforce: the
// fields of JOBOBJECT_EXTENDED_LIMIT_INFORMATION and of
// JOBOBJECT_CPU_RATE_CONTROL_INFORMATION that conch sets.
type jobPlan struct {
	// LimitFlags are JOB_OBJECT_LIMIT_* bits: always kill on job close
	// (the supervisor's handle is the job's last: a supervisor that dies
	// takes the session with it) and die on an unhandled exception (no
	// error dialog holds a process that nobody can see).
	LimitFlags uint32
	// JobMemoryLimit bounds the memory committed by all the job's
	// processes together (bytes); past it an allocation fails.
	JobMemoryLimit uint64
	// ActiveProcessLimit bounds the processes alive at once (threads are
	// not counted, unlike the pids controller of Linux).
	ActiveProcessLimit uint32
	// CPUControlFlags and CPURate or CPUWeight: a hard cap in hundredths
	// of a percent of all the machine's processors, or a weight of 1 to 9
	// (5 is Windows's default); 0 flags: no CPU control.
	CPUControlFlags uint32
	CPURate         uint32
	CPUWeight       uint32
}

// planJob turns the limits a spec asks for into a jobPlan for a machine
// with ncpu processors, with the limits in force (Key → value) and a
// warning naming the setting of each that is not.
func planJob(want []proto.Limit, ncpu int) (jobPlan, map[string]float64, []string) {
	p := jobPlan{LimitFlags: jobLimitKillOnJobClose | jobLimitDieOnUnhandledExcept}
	enforced := map[string]float64{}
	var warns []string
	hardCap := slices.ContainsFunc(want, func(l proto.Limit) bool { return l.Key == "cpus" })
	for _, l := range want {
		switch l.Key {
		case "memoryBytes":
			p.LimitFlags |= jobLimitJobMemory
			p.JobMemoryLimit = uint64(l.Value)
		case "pids":
			p.LimitFlags |= jobLimitActiveProcess
			p.ActiveProcessLimit = uint32(min(l.Value, math.MaxUint32))
		case "cpus":
			rate := math.Ceil(l.Value / float64(max(ncpu, 1)) * jobCPURateMax)
			p.CPUControlFlags = jobCPURateControlEnable | jobCPURateControlHardCap
			p.CPURate = uint32(min(max(rate, 1), jobCPURateMax))
		case "cpuWeight":
			if hardCap {
				// A job has one kind of CPU control: the cap wins.
				warns = append(warns, fmt.Sprintf("Warning: %s is not enforced (a Windows job has either a CPU cap or a weight, and sandbox.limits.cpus caps it).", l.Setting))
				continue
			}
			p.CPUControlFlags = jobCPURateControlEnable | jobCPURateControlWeightBased
			p.CPUWeight = jobWeight(l.Value)
		default:
			warns = append(warns, fmt.Sprintf("Warning: %s is not enforced (unknown limit %q).", l.Setting, l.Key))
			continue
		}
		enforced[l.Key] = l.Value
	}
	return p, enforced, warns
}

// jobWeight maps a cgroup cpu.weight (1 to 10000, default 100) onto a
// Job Object's weight (1 to 9, default 5): each doubling of the share
// is one step, so 100 is 5, 200 is 6 and 50 is 4.
func jobWeight(w float64) uint32 {
	step := math.Round(math.Log2(max(w, 1) / 100))
	return uint32(min(max(5+step, jobCPUWeightMin), jobCPUWeightMax))
}

// envBlock is env as CreateProcess takes it (CREATE_UNICODE_ENVIRONMENT):
// UTF-16 "KEY=value" strings, each ending in a NUL, then one more NUL.
// Windows variable names are case-insensitive: of two entries that
// differ only in case the later wins, as in os/exec. Entries are sorted
// case-insensitively by name, as Windows keeps its own block; the "=C:"
// entries (the current directory of each drive) sort first. SYSTEMROOT
// is added from systemRoot when env lacks it: without it many programs
// (and the Winsock of every Go program) fail to start.
func envBlock(env []string, systemRoot string) []uint16 {
	keyOf := func(kv string) string {
		if i := strings.IndexByte(kv[min(1, len(kv)):], '='); i >= 0 {
			return kv[:i+min(1, len(kv))]
		}
		return kv
	}
	byKey := map[string]int{}
	var out []string
	for _, kv := range env {
		if kv == "" || strings.IndexByte(kv, 0) >= 0 {
			continue
		}
		k := strings.ToUpper(keyOf(kv))
		if i, ok := byKey[k]; ok {
			out[i] = kv
			continue
		}
		byKey[k] = len(out)
		out = append(out, kv)
	}
	if _, ok := byKey["SYSTEMROOT"]; !ok && systemRoot != "" {
		out = append(out, "SYSTEMROOT="+systemRoot)
	}
	slices.SortStableFunc(out, func(a, b string) int {
		return strings.Compare(strings.ToUpper(keyOf(a)), strings.ToUpper(keyOf(b)))
	})
	var b []uint16
	for _, kv := range out {
		b = append(b, utf16.Encode([]rune(kv))...)
		b = append(b, 0)
	}
	if len(out) == 0 {
		b = append(b, 0) // an empty block is two NULs
	}
	return append(b, 0)
}

// consoleSize is the size of a session's pseudoconsole, in the int16
// cells of a COORD: 120×30 unless the spec names a size, and never
// beyond what a COORD holds.
func consoleSize(cols, rows int) (x, y int16) {
	if cols <= 0 {
		cols = 120
	}
	if rows <= 0 {
		rows = 30
	}
	return int16(min(cols, math.MaxInt16)), int16(min(rows, math.MaxInt16))
}

// winSignal is what a signal sent to a session does on Windows, which has
// no signals: its console gets an interrupt (Ctrl+C typed into a
// pseudoconsole, Ctrl+Break sent to the command's console process group
// without one), or the Job Object is terminated, or nothing happens.
type winSignal int

const (
	winSignalNone winSignal = iota
	winSignalInterrupt
	winSignalTerminate
)

// winSignalOf maps a Unix signal number: SIGINT, SIGTERM and SIGQUIT are
// an interrupt (a console program's only polite request to stop),
// SIGKILL terminates the job, and the rest (SIGHUP, whose Windows form is
// closing the pseudoconsole at the end, SIGSTOP, SIGCONT, SIGUSR1, …)
// have no Windows form.
func winSignalOf(sig int) winSignal {
	switch sig {
	case 2, 3, 15: // SIGINT, SIGQUIT, SIGTERM
		return winSignalInterrupt
	case 9: // SIGKILL
		return winSignalTerminate
	}
	return winSignalNone
}
