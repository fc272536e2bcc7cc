package admin

// noCgroup is doctor's check on Windows, which has no cgroups: what
// contains a session there instead. Not yet run on Windows.
var noCgroup = struct{ name, level, text string }{
	"containment.job", "info",
	"Windows has no cgroups: each session has a supervisor of its own and runs in a Job Object " +
		"(created suspended, then assigned, so everything the command starts is born in it and cannot leave it; " +
		"a kill terminates the job; a supervisor that dies takes its job with it). Session limits: memoryBytes bounds the " +
		"memory the job commits (allocations fail past it; nothing is killed for it), pids the processes alive at once " +
		"(not threads), cpus is a hard cap, cpuWeight a weight of 1 to 9. An interrupt is Ctrl+C in a PTY session, " +
		"Ctrl+Break to the command's process group otherwise; there is no SIGHUP, SIGSTOP or SIGCONT",
}
