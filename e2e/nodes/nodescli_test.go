package nodes

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestNodesCLIOfflineMatchesGateway: `conch nodes` without a gateway
// runs the operations on the home's files; with one it goes through the
// gateway's API. On the same pairing state both answer the same bytes and
// exit codes, failures included.
func TestNodesCLIOfflineMatchesGateway(t *testing.T) {
	t.Parallel()
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	n, _ := e2etest.PairNode(t, g, "cli-box", e2etest.NodeFullConfig)
	n.Stop()
	g.WaitNode("cli-box", "offline")
	g.Stop()

	type answer struct {
		out, errOut string
		code        int
	}
	cases := [][]string{
		{"nodes", "list"},
		{"nodes", "list", "--json"},
		{"nodes", "approve", "nosuch"},
		{"nodes", "remove", "nosuch"},
		{"nodes", "rename", "nosuch", "x"},
		{"nodes", "rename", "cli-box", "deadbeef99"},
		{"nodes", "rename", "cli-box", "cli-box"},
		{"nodes", "invite", "--ttl", "0s"},
	}
	run := func(args []string) answer {
		out, errOut, code := e2etest.RunCLI(t, nil, append(args, "--home", gh)...)
		return answer{out, errOut, code}
	}
	offline := map[string]answer{}
	for _, c := range cases {
		offline[strings.Join(c, " ")] = run(c)
	}
	// A new invite answers the same fields.
	inviteKeys := func() string {
		out, errOut, code := e2etest.RunCLI(t, nil, "nodes", "invite", "--json", "--home", gh)
		var m map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &m) != nil || !strings.HasSuffix(out, "}\n") {
			t.Fatalf("invite --json: %d %q %s", code, out, errOut)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return strings.Join(keys, ",")
	}
	offKeys := inviteKeys()

	g = e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	defer g.Stop()
	for _, c := range cases {
		k := strings.Join(c, " ")
		on, off := run(c), offline[k]
		if on != off {
			t.Errorf("conch %s:\n gateway: %d %q %q\n offline: %d %q %q", k, on.code, on.out, on.errOut, off.code, off.out, off.errOut)
		}
	}
	if on := inviteKeys(); on != offKeys {
		t.Errorf("invite --json fields: gateway %s, offline %s", on, offKeys)
	}
	// The failures are failures, with the codes of their kind.
	for k, want := range map[string]int{"nodes approve nosuch": e2etest.ExitNotFound, "nodes remove nosuch": e2etest.ExitNotFound, "nodes invite --ttl 0s": e2etest.ExitFailed} {
		if got := offline[k].code; got != want {
			t.Errorf("conch %s: exit %d, want %d (%s)", k, got, want, offline[k].errOut)
		}
	}
	if !strings.Contains(offline["nodes list"].out, "offline") || !strings.Contains(offline["nodes list"].out, "cli-box") {
		t.Errorf("nodes list: %q", offline["nodes list"].out)
	}
}
