package engine

import (
	"fmt"
	"strings"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/policy"
)

// configuredHost is an agent's configured exec host (lower case, "" for
// none) and what set it: its exec defaults, else agents.<id>.tools.exec.host,
// else tools.exec.host.
func (e *Engine) configuredHost(agent string) (host, source string) {
	if d := e.execDefaults(agent); d.Host != "" {
		return strings.ToLower(d.Host), "exec defaults"
	}
	cfg := e.conf()
	if ac, ok := cfg.Agents[agent]; ok && ac.Tools != nil && ac.Tools.Exec.Host != "" {
		return strings.ToLower(ac.Tools.Exec.Host), "agents." + agent + ".tools.exec.host"
	}
	if h := cfg.Tools.Exec.Host; h != "" {
		return strings.ToLower(h), "tools.exec.host"
	}
	return "", ""
}

// Gate is the GateStatus of agent's calls that name no host, given its
// effective policy p on the gateway. It follows plan's host switch for
// such a call (without elevated, which a call must ask for).
func (e *Engine) Gate(agent string, p Policy) apitype.GateStatus {
	host, src := e.configuredHost(agent)
	sb := e.conf().SandboxFor(agent)
	switch {
	case host == "node":
		return apitype.GateStatus{Host: "node", HostSource: src, Applies: true,
			Reason: fmt.Sprintf("agent %s runs on host node (%s); the node's own approvals file and config decide, not this home's", agent, src)}
	case host == "gateway":
		g := apitype.GateStatus{Host: "gateway", HostSource: src, Applies: true}
		if p.Security == policy.SecurityFull && p.Ask == policy.AskOff {
			g.Ungated = true
			g.Reason = fmt.Sprintf("agent %s runs on host gateway (%s) with security=full, ask=off", agent, src)
		} else {
			g.Reason = fmt.Sprintf("agent %s runs on host gateway (%s)", agent, src)
		}
		return g
	case host != "" && host != "sandbox":
		return apitype.GateStatus{Host: host, HostSource: src, Reason: fmt.Sprintf("agent %s has an unknown host %q (%s): every call fails", agent, host, src)}
	case sb.On:
		if src == "" {
			src = "sandbox.mode"
		}
		return apitype.GateStatus{Host: "sandbox", HostSource: src,
			Reason: fmt.Sprintf("agent %s runs in the sandbox (sandbox.mode=%s); sandboxed commands run without approvals", agent, sb.Mode)}
	case host == "sandbox":
		return apitype.GateStatus{Host: "sandbox", HostSource: src,
			Reason: fmt.Sprintf("agent %s has host=sandbox (%s) while sandboxing is off: every call fails with sandbox_unavailable", agent, src)}
	default:
		return apitype.GateStatus{Host: "gateway", Ungated: true,
			Reason: fmt.Sprintf("agent %s has no configured host and sandboxing is off (the defaults): every command runs on this machine as if security=full, ask=off (to gate it: conch agents defaults %s host=gateway)", agent, agent)}
	}
}

// Text is the human form of an explanation: the gate line first, then
// the analysis and the verdict. Where the gate does not apply, the policy
// line and the verdict are labelled as what it would use and decide once
// it does.
func (x Explanation) Text(agent string) string {
	header := x.Policy.Header(agent, "gateway")
	if !x.Gate.Applies {
		header = "if the gate applied: " + header
	}
	body := x.Decision.Explain(header)
	if !x.Gate.Applies {
		body = strings.Replace(body, "\nverdict: ", "\nverdict if the gate applied: ", 1)
	}
	out := "gate: " + x.Gate.Line() + "\n" + body
	if x.Policy.FileErr != nil {
		out += fmt.Sprintf("note: host exec is denied: %v\n", x.Policy.FileErr)
	}
	return out
}
