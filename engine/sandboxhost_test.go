package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/host"
)

// renamed is a fakeHost registered under another name.
type renamed struct {
	*fakeHost
	name string
}

func (r renamed) Name() string { return r.name }

// A sandboxed agent whose backend's sandboxes live elsewhere (kubernetes:
// pods) is planned by the host that backend registered (host.SandboxHost),
// not by the gateway's sandbox host, and its result still names host
// sandbox; an agent of a local backend never reaches that host.
func TestRemoteBackendPlannedByItsHost(t *testing.T) {
	podName := host.SandboxHost("kubernetes")
	if podName == "sandbox" {
		t.Fatal("no host registered for the kubernetes backend")
	}
	f := &fakeHost{planErr: apitype.Errorf(apitype.CodeNodeUnavailable, "the pod host planned it"), startErr: []error{errors.New("must not start")}}
	e := fakeEngine(t, `{"sandbox":{"mode":"all","backend":"kubernetes","kubernetes":{"gatewayUrl":"http://127.0.0.1:9","image":"conch:test"}},
		"agents":{"local":{"sandbox":{"backend":"landlock"}}}}`, renamed{f, podName})
	r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
	if errorCode(r) != apitype.CodeNodeUnavailable || f.planned != 1 || f.startCount() != 0 {
		t.Fatalf("kubernetes agent: code %q, planned %d, started %d: %q", errorCode(r), f.planned, f.startCount(), r.Text)
	}
	e.Exec(context.Background(), "local", apitype.ExecParams{Command: "echo hi"})
	if f.planned != 1 {
		t.Fatalf("a landlock agent reached the %s host", podName)
	}
	if r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi", Host: podName}); errorCode(r) != apitype.CodeHostNotAllowed || f.planned != 1 {
		t.Fatalf("exec host=%s: code %q, planned %d; want %s and no plan", podName, errorCode(r), f.planned, apitype.CodeHostNotAllowed)
	}
}
