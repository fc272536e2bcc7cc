package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestNoWaitWithGateway: `conch exec --no-wait` on a home a gateway
// serves names the CLI commands that decide and follow the request, and
// the request is still pending after the command exits. (Without a
// gateway the request died with the command's own engine while the
// output said how to approve it: TestCLIApprovals.)
func TestNoWaitWithGateway(t *testing.T) {
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"always"`, "")
	e2etest.StartGateway(t, home)
	out, errOut, code := e2etest.RunCLI(t, nil, "exec", "--home", home, "--no-wait", "--", "echo", "later")
	if code != e2etest.ExitNoWait || strings.TrimSpace(out) == "" {
		t.Fatalf("--no-wait: exit %d, %q %q", code, out, errOut)
	}
	id := strings.TrimSpace(out)
	if !regexp.MustCompile(`\nDecide: conch approvals approve [0-9a-f]{8} \| conch approvals deny [0-9a-f]{8}; then follow it: conch wait ` + regexp.QuoteMeta(id) + `\n`).MatchString(errOut) {
		t.Errorf("--no-wait names no CLI command to go on:\n%s", errOut)
	}
	pending, _, _ := e2etest.RunCLI(t, nil, "approvals", "pending", "--home", home)
	if !strings.Contains(pending, "echo later") {
		t.Errorf("the request is not pending after --no-wait exits:\n%s", pending)
	}
}
