package proto

// KilledBy says who asked for a session's kill sequence: the killedBy of
// a killed session's end state. The set is closed: the supervisor refuses
// a kill request with any other value, so every killedBy a reader finds in
// exit.json, the ledger or a result is one of these.
type KilledBy string

// The causes of a kill.
const (
	// KilledByAgent: the agent that owns the session (process kill or
	// remove, a cancelled exec call, a withdrawn approval).
	KilledByAgent KilledBy = "agent"
	// KilledByOperator: an operator acting for the agent (control UI,
	// CLI with operator rights).
	KilledByOperator KilledBy = "operator"
	// KilledByTimeout: the session's timeout.
	KilledByTimeout KilledBy = "timeout"
	// KilledByShutdown: conch stopping: a supervisor that got SIGTERM,
	// SIGINT or SIGHUP, an engine that ends its sessions when it stops
	// (sessions.survive false, conch serve --stop-sessions), a session
	// whose engine never took its start report.
	KilledByShutdown KilledBy = "shutdown"
	// KilledByOOM: the kernel's OOM killer, for the session's memory
	// limit (the supervisor reads its cgroup's oom_kill count when the
	// main process died of SIGKILL). Never the cause of a kill request.
	KilledByOOM KilledBy = "oom"
)

// KilledByAll lists every KilledBy, for validation, tests and docs.
var KilledByAll = []KilledBy{KilledByAgent, KilledByOperator, KilledByTimeout, KilledByShutdown, KilledByOOM}

// Valid reports whether k is one of KilledByAll.
func (k KilledBy) Valid() bool {
	for _, v := range KilledByAll {
		if k == v {
			return true
		}
	}
	return false
}
