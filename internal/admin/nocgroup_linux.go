package admin

// noCgroup is doctor's check when no session cgroup can be made.
var noCgroup = struct{ name, level, text string }{
	"containment.no_cgroup", "info",
	"no writable cgroup: sessions are contained by process groups and the supervisor as subreaper",
}
