package proto

// Limits are a session's resource limits (quotas.session); a zero field
// is no limit. They are applied through the session's cgroups: cgroup v2
// memory.max, pids.max and cpu.weight where the session's v2 cgroup has
// the controller, else the v1 memory, pids and cpu hierarchies.
type Limits struct {
	// MemoryBytes bounds the memory of the whole tree (bytes); past it
	// the kernel's OOM killer kills a process of the session, and a
	// session whose main process it killed ends killed, killedBy oom.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// Pids bounds the tasks (processes and threads) alive at once.
	Pids int64 `json:"pids,omitempty"`
	// CPUWeight is the session's share of CPU time against its siblings
	// under contention, 1 to 10000 (cgroup v2 cpu.weight, 100 is the
	// kernel's default; v1 cpu.shares = weight × 1024 / 100).
	CPUWeight int64 `json:"cpuWeight,omitempty"`
}

// Limit is one limit to set on a session's cgroups.
type Limit struct {
	// Key is the limit's name in meta.json and results: memoryBytes,
	// pids, cpus or cpuWeight.
	Key string
	// Setting is the configuration key it comes from, named in the
	// warning when it cannot be enforced.
	Setting string
	Value   float64
}

// LimitsMeta is meta.json's record of a session's limits: those in force
// (Key → value) and a sentence for each that is not.
type LimitsMeta struct {
	Enforced   map[string]float64 `json:"enforced,omitempty"`
	Unenforced []string           `json:"unenforced,omitempty"`
}

// LimitList is what a spec asks for: the session limits, then a sandbox's
// own, which replace a session limit of the same key.
func (spec *Spec) LimitList() []Limit {
	var out []Limit
	set := func(key, setting string, v float64) {
		if v <= 0 {
			return
		}
		for i, l := range out {
			if l.Key == key {
				out[i] = Limit{key, setting, v}
				return
			}
		}
		out = append(out, Limit{key, setting, v})
	}
	if l := spec.Limits; l != nil {
		set("memoryBytes", "quotas.session.memoryBytes", float64(l.MemoryBytes))
		set("pids", "quotas.session.pids", float64(l.Pids))
		set("cpuWeight", "quotas.session.cpuWeight", float64(l.CPUWeight))
	}
	if sb := spec.Sandbox; sb != nil {
		set("memoryBytes", "sandbox.limits.memoryBytes", float64(sb.MemoryBytes))
		set("pids", "sandbox.limits.pids", float64(sb.Pids))
		set("cpus", "sandbox.limits.cpus", sb.CPUs)
	}
	return out
}

// LimitHits are what a session's limits did to it short of ending it
// (Exit.LimitHits): processes the OOM killer ended for the memory limit
// while the main process went on, and forks the task limit refused.
// Counted from the cgroups' event counters (v2 memory.events oom_kill and
// pids.events max; v1 memory.oom_control oom_kill and pids.events max).
type LimitHits struct {
	OOMKills    uint64  `json:"oomKills,omitempty"`
	MemoryBytes float64 `json:"memoryBytes,omitempty"` // the memory limit, bytes
	PidsRefused uint64  `json:"pidsRefused,omitempty"`
	Pids        float64 `json:"pids,omitempty"` // the task limit
}
