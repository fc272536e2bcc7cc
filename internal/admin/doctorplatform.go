package admin

import (
	"context"
	"errors"
	"runtime"
	"strings"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

// check is one finding of doctor whose words depend on the OS.
type check struct{ name, level, text string }

// noCgroup is doctor's check when no session cgroup can be made: always
// on macOS, which has no cgroups and no child subreaper, and on Windows
// (Job Objects instead).
var noCgroup = noCgroupFor(runtime.GOOS)

// noCgroupFor is noCgroup on goos (a GOOS value).
func noCgroupFor(goos string) check {
	if goos == "windows" {
		// Not yet run on Windows.
		return check{"containment.job", "info",
			"Windows has no cgroups: each session has a supervisor of its own and runs in a Job Object " +
				"(created suspended, then assigned, so everything the command starts is born in it and cannot leave it; " +
				"a kill terminates the job; a supervisor that dies takes its job with it). Session limits: memoryBytes bounds the " +
				"memory the job commits (allocations fail past it; nothing is killed for it), pids the processes alive at once " +
				"(not threads), cpus is a hard cap, cpuWeight a weight of 1 to 9. An interrupt is Ctrl+C in a PTY session, " +
				"Ctrl+Break to the command's process group otherwise; there is no SIGHUP, SIGSTOP or SIGCONT"}
	}
	if goos == "darwin" {
		return check{"containment.tracker", "warn",
			"macOS has no cgroups: a session is contained by its process group and a tracker of the processes it starts " +
				"(process-table snapshots every 0.5 s and at each kill, linked by parent pid and remembered after their parent exits). " +
				"What can escape a kill: a process that forks, whose child leaves the process group (setsid), when the intermediate exits " +
				"before a snapshot has seen it; and anything started through launchd (open, launchctl, osascript, XPC services). " +
				"Sandbox limits (memory, pids, cpus) are not enforced"}
	}
	return check{"containment.no_cgroup", "info",
		"no writable cgroup: sessions are contained by process groups and the supervisor as subreaper"}
}

// doctorPlatform reports what this OS gives conch that Linux gives
// differently: on macOS, that it has not yet run there, what its sandbox
// cannot enforce, and the privacy checks (TCC) a background service
// meets. (What contains a session there is noCgroup's.) Linux reports
// nothing here.
func doctorPlatform(add func(id, level, format string, args ...any)) {
	err := errors.New("the seatbelt backend is not built into this program")
	var gaps []string
	if b := sandbox.New("seatbelt", config.SandboxSettings{}); b != nil {
		err = b.Available(context.Background())
		if g, ok := b.(sandbox.Gapped); ok {
			gaps = g.Gaps(&sandbox.Run{})
		}
	}
	for _, c := range platformChecks(runtime.GOOS, err, gaps) {
		add(c.name, c.level, "%s", c.text)
	}
}

// platformChecks are doctorPlatform's findings on goos: seatbelt is why
// the Seatbelt backend is unusable (nil: it is usable), gaps what it
// cannot enforce.
func platformChecks(goos string, seatbelt error, gaps []string) []check {
	if goos != "darwin" {
		return nil
	}
	out := []check{{"platform.untested", "warn",
		"conch for macOS is built, and its portable parts are tested, on Linux; it has not yet been run on a Mac: " +
			"treat its containment and its sandbox as untested"}}
	if seatbelt != nil {
		out = append(out, check{"sandbox.seatbelt", "warn",
			"the Seatbelt sandbox is unusable (" + seatbelt.Error() + "): sandboxed runs fail with sandbox_unavailable unless sandbox.backend is docker"})
	} else {
		out = append(out, check{"sandbox.seatbelt", "info",
			"sandboxed runs use Seatbelt (/usr/bin/sandbox-exec, deprecated by Apple and still shipped). It cannot enforce: " + strings.Join(gaps, "; ")})
	}
	return append(out, check{"platform.tcc", "info",
		"commands of a node or gateway started as a LaunchAgent that touch ~/Documents, ~/Desktop, ~/Downloads, iCloud Drive or removable volumes " +
			"meet macOS privacy checks (TCC): a prompt, or Operation not permitted without one; grant Full Disk Access to the conch binary " +
			"(System Settings, Privacy & Security) or run it from a terminal that has it"})
}
