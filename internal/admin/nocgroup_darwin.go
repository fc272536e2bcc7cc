package admin

// noCgroup is doctor's check when no session cgroup can be made: always
// on macOS, which has no cgroups and no child subreaper.
var noCgroup = struct{ name, level, text string }{
	"containment.tracker", "warn",
	"macOS has no cgroups: a session is contained by its process group and a tracker of the processes it starts " +
		"(process-table snapshots every 0.5 s and at each kill, linked by parent pid and remembered after their parent exits). " +
		"What can escape a kill: a process that forks, whose child leaves the process group (setsid), when the intermediate exits " +
		"before a snapshot has seen it; and anything started through launchd (open, launchctl, osascript, XPC services). " +
		"Sandbox limits (memory, pids, cpus) are not enforced",
}
