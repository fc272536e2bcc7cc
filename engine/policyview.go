package engine

import (
	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
)

// PolicyView answers what the engine of a home would decide about its
// agents' calls — the configured host, the effective policy, the gate —
// from the home's files and a configuration, without running an engine
// (conch doctor, policy explain). It reads the home's exec defaults and
// approvals file on every call.
type PolicyView struct{ e *Engine }

// NewPolicyView returns the view of home under cfg.
func NewPolicyView(home string, cfg *config.Config) PolicyView {
	e := &Engine{home: home}
	e.cfgp.Store(cfg)
	return PolicyView{e}
}

// ConfiguredHost is agent's configured exec host (lower case, "" for
// none) and what set it (see apitype.GateStatus.HostSource).
func (v PolicyView) ConfiguredHost(agent string) (host, source string) {
	return v.e.configuredHost(agent)
}

// EffectivePolicy is agent's policy for command in cwd on the gateway,
// with PATH path (see Engine.EffectivePolicy).
func (v PolicyView) EffectivePolicy(agent, command, cwd, path string) Policy {
	return v.e.EffectivePolicy(agent, "", "", command, cwd, path)
}

// Gate is the GateStatus of agent's calls that name no host, given its
// effective policy p.
func (v PolicyView) Gate(agent string, p Policy) apitype.GateStatus { return v.e.Gate(agent, p) }

// CheckHome is the home's disk state measured now, with a probe write:
// it finds a home that cannot be written even where the filesystem looks
// fine (permissions, an I/O error).
func CheckHome(home string, cfg *config.Config) apitype.DiskStatus { return homeCheck(home, cfg) }

// FallbackSocketDir is where the supervisor sockets of home go when their
// path in the home would be too long for a socket address.
func FallbackSocketDir(home string) string { return (&Engine{home: home}).fallbackSocketDir() }
