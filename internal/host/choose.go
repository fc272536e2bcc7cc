package host

import "github.com/conchsh/conch/apitype"

// Choice is what decides the host of a call.
type Choice struct {
	// Configured is the agent's configured host ("" when none).
	Configured string
	// Requested is the call's host parameter ("" when none).
	Requested string
	// Elevated is the resolved elevated level: "", "ask" or "full".
	Elevated string
	// SandboxOn says sandboxing is on for the agent; SandboxErr is why no
	// backend is usable, if none is.
	SandboxOn  bool
	SandboxErr error
}

// Choose picks the host of a call and the reason it runs ungated, if it
// does: elevated forces the gateway; a configured host other than the
// sandbox (the gateway, a node, any other registered host) is the only one
// allowed; otherwise the sandbox when sandboxing is on
// (failing closed when no backend is usable), else the gateway, ungated
// because sandboxing is off.
func Choose(c Choice) (name, reason string, err *apitype.Error) {
	notAllowed := func() (string, string, *apitype.Error) {
		return "", "", apitype.Errorf(apitype.CodeHostNotAllowed, "exec host not allowed (requested %s; configure tools.exec.host=%s to allow).", c.Requested, c.Requested)
	}
	switch {
	case c.Elevated == "ask":
		return "gateway", "", nil
	case c.Elevated == "full":
		// Gateway host, security full, ask off: no approval gate, still
		// journalled and ledgered.
		return "gateway", "elevated-full", nil
	case named(c.Configured) && c.Requested != "" && c.Requested != c.Configured,
		named(c.Requested) && c.Requested != c.Configured:
		return notAllowed()
	case named(c.Configured):
		// node, or any host registered beside the three.
		return c.Configured, "", nil
	case c.Configured == "gateway" && c.Requested != "" && c.Requested != "gateway":
		return notAllowed()
	case c.Configured == "gateway":
		return "gateway", "", nil
	case c.SandboxOn && c.SandboxErr != nil:
		// Sandboxing is on but no backend is usable: fail closed, for
		// the implicit default too.
		return "", "", SandboxUnavailable(c.SandboxErr)
	case c.SandboxOn:
		if c.Requested != "" && c.Requested != "sandbox" {
			return notAllowed()
		}
		return "sandbox", "", nil
	case c.Configured == "sandbox" || c.Requested == "sandbox":
		return "", "", SandboxUnavailable(nil)
	default:
		return "gateway", "implicit-sandbox-off", nil
	}
}

// named reports whether h is a host a call runs on only when the agent is
// configured for it: every host but the gateway (which elevated and the
// sandbox-off default also reach) and the sandbox (which sandboxing on
// selects).
func named(h string) bool { return h != "" && h != "gateway" && h != "sandbox" }

// SandboxUnavailable is the fail-closed error of a sandbox that cannot
// run; the cause, when known, is appended on a last line.
func SandboxUnavailable(cause error) *apitype.Error {
	msg := "exec host=sandbox is configured, but sandbox runtime is unavailable for this session.\nEnable sandboxing (sandbox.mode) with an available backend (bwrap, docker or landlock), or use host=gateway with approvals."
	if cause != nil {
		msg += "\n(" + cause.Error() + ")"
	}
	return apitype.Errorf(apitype.CodeSandboxUnavail, "%s", msg)
}
