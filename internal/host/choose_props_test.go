package host

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/apitype"
)

// TestChooseProperties states what the host choice promises and checks
// it on every input built from the registered host names (and "", and a
// name no host registered), not against a copy of the switch:
//
//   - elevated ask and full always run on the gateway; full, and the
//     sandbox-off default, are the only ungated reasons;
//   - the host chosen is the gateway, the sandbox, or the configured host,
//     and a call that names a host gets that host or an error, never
//     another;
//   - a host other than the gateway and the sandbox runs a call only when
//     the agent is configured for it;
//   - sandboxing on fails closed: with no usable backend no call runs
//     (unless elevated or configured for another host), and a call that
//     asks for the sandbox never lands on the gateway.
func TestChooseProperties(t *testing.T) {
	names := append([]string{"", "unregistered-host"}, Names()...)
	for _, want := range []string{"gateway", "sandbox", "node", "pod"} {
		if !slices.Contains(names, want) {
			t.Fatalf("host %s is not registered: %v", want, names)
		}
	}
	n := 0
	for _, conf := range names {
		for _, req := range names {
			for _, level := range []string{"", "ask", "full"} {
				for _, on := range []bool{false, true} {
					for _, sbErr := range []error{nil, errors.New("no backend")} {
						n++
						c := Choice{Configured: conf, Requested: req, Elevated: level, SandboxOn: on, SandboxErr: sbErr}
						name, reason, err := Choose(c)
						where := fmt.Sprintf("%+v -> %q %q %v", c, name, reason, err)
						checkChoice(t, where, c, name, reason, err)
					}
				}
			}
		}
	}
	if want := len(names) * len(names) * 3 * 2 * 2; n != want {
		t.Fatalf("%d cases, want %d", n, want)
	}
}

func checkChoice(t *testing.T, where string, c Choice, name, reason string, err *apitype.Error) {
	t.Helper()
	if (err == nil) == (name == "") {
		t.Fatalf("%s: a host or an error, exactly one", where)
	}
	if err != nil && reason != "" {
		t.Fatalf("%s: a reason with an error", where)
	}
	if c.Elevated != "" {
		want := map[string]string{"ask": "", "full": "elevated-full"}[c.Elevated]
		if name != "gateway" || reason != want {
			t.Fatalf("%s: elevated %s must run on the gateway (reason %q)", where, c.Elevated, want)
		}
		return
	}
	if err != nil {
		if err.Code != apitype.CodeHostNotAllowed && err.Code != apitype.CodeSandboxUnavail {
			t.Fatalf("%s: unexpected error code", where)
		}
		return
	}
	if name != "gateway" && name != "sandbox" && name != c.Configured {
		t.Fatalf("%s: a host that is neither the gateway, the sandbox nor the configured one", where)
	}
	if c.Requested != "" && name != c.Requested {
		t.Fatalf("%s: the call asked for %s", where, c.Requested)
	}
	if named(name) && name != c.Configured {
		t.Fatalf("%s: %s runs only agents configured for it", where, name)
	}
	switch reason {
	case "":
	case "implicit-sandbox-off":
		if c.SandboxOn || name != "gateway" || c.Configured != "" {
			t.Fatalf("%s: the sandbox-off reason when sandboxing is on or a host is configured", where)
		}
	default:
		t.Fatalf("%s: unknown reason", where)
	}
	sandboxWanted := c.Configured == "sandbox" || c.Requested == "sandbox" ||
		(c.SandboxOn && c.Configured != "gateway" && !named(c.Configured))
	if sandboxWanted && name != "sandbox" {
		t.Fatalf("%s: a call for the sandbox ran on %s", where, name)
	}
	if name == "sandbox" && (!c.SandboxOn || c.SandboxErr != nil) {
		t.Fatalf("%s: the sandbox without a usable backend", where)
	}
}

// TestSandboxUnavailableSaysWhy: the fail-closed error carries its code
// and, when known, the cause on its last line.
func TestSandboxUnavailableSaysWhy(t *testing.T) {
	e := SandboxUnavailable(errors.New("bwrap: no user namespaces"))
	if e.Code != apitype.CodeSandboxUnavail || !strings.HasSuffix(e.Message, "\n(bwrap: no user namespaces)") {
		t.Fatalf("%+v", e)
	}
	if e := SandboxUnavailable(nil); strings.HasSuffix(e.Message, ")") {
		t.Fatalf("no cause, yet %q", e.Message)
	}
}
