package nodes

import (
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestNodeDenialNamesTheLayer: a denied node run says which layer denied
// it: the node's policy alone (security=deny, or an allowlist miss under
// the node's own allowlist and ask=off), or the gateway's settings
// combined with the node's (the node alone runs anything, the gateway
// sent security=allowlist), or the gateway's policy before the node was
// asked.
func TestNodeDenialNamesTheLayer(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	e2etest.PairNode(t, g, "locked", `{"tools":{"exec":{"security":"deny"}}}`)
	e2etest.PairNode(t, g, "strict", `{"tools":{"exec":{"security":"allowlist","ask":"off"}}}`)
	e2etest.PairNode(t, g, "open", `{"tools":{"exec":{"security":"full","ask":"off"}}}`)
	for _, c := range []struct {
		args         map[string]any
		prefix, want string
	}{
		{map[string]any{"command": "echo hi", "node": "locked"}, "SYSTEM_RUN_DISABLED: security=deny", "denied by the node's policy: security=deny"},
		{map[string]any{"command": "touch x", "node": "strict"}, "SYSTEM_RUN_DENIED: allowlist miss", "denied by the node's policy: security=allowlist ask=off"},
		{map[string]any{"command": "touch x", "node": "open", "security": "allowlist"}, "SYSTEM_RUN_DENIED: allowlist miss", "denied by the gateway's policy combined with the node's: the gateway sent security=allowlist"},
		{map[string]any{"command": "touch x", "node": "open", "security": "deny"}, "exec denied: host=node security=deny", "denied by the gateway's policy, before the node was asked"},
	} {
		_, m := g.Tool("exec", c.args)
		text := e2etest.ErrText(m)
		if e2etest.ErrCode(m) != "denied" || !strings.HasPrefix(text, c.prefix) || !strings.Contains(text, c.want) {
			t.Errorf("exec %v: %s %q, want %q naming %q", c.args, e2etest.ErrCode(m), text, c.prefix, c.want)
		}
	}
}
