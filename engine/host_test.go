package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// fakeHost stands in for the gateway host in the engine's own tests: it
// plans like a gated gateway and records what reaches Start, which fails
// with startErr (a real start needs a supervisor; the end-to-end tests
// cover that).
type fakeHost struct {
	planErr  *apitype.Error
	startErr []error // one per Start call; the last repeats

	mu      sync.Mutex
	planned int
	starts  []proto.Spec
}

func (f *fakeHost) Name() string { return "gateway" }

func (f *fakeHost) Plan(ctx context.Context, req host.Request, pl *host.Plan) *apitype.Error {
	f.mu.Lock()
	f.planned++
	f.mu.Unlock()
	if f.planErr != nil {
		return f.planErr
	}
	// Gate left at its zero value: a host that names no gate is gated.
	pl.Cwd = req.Workspace
	pl.Argv = []string{"/bin/sh", "-c", req.Params.Command}
	pl.Env = []string{"PATH=/usr/bin:/bin"}
	return nil
}

func (f *fakeHost) Start(ctx context.Context, pl *host.Plan, spec proto.Spec, run host.Run) (*proto.Handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, spec)
	err := f.startErr[min(len(f.starts), len(f.startErr))-1]
	return nil, err
}

func (f *fakeHost) startCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.starts)
}

func fakeEngine(t *testing.T, cfgJSON string, h host.Host) *Engine {
	t.Helper()
	home := t.TempDir()
	seedLoginCache(home)
	cfg, err := config.Parse([]byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Home: home, Config: cfg, Workdir: home, SupervisorArgv: []string{os.Args[0], "supervise"}, Hosts: []host.Host{h}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func errorCode(r apitype.Result) string {
	if d, ok := r.Details.(*apitype.ErrorDetails); ok && d.Error != nil {
		return d.Error.Code
	}
	return ""
}

// A command the policy denies is answered by the gate: the host planned
// it, and it never reaches Host.Start.
func TestFakeHostDeniedNeverStarts(t *testing.T) {
	f := &fakeHost{startErr: []error{errors.New("must not start")}}
	e := fakeEngine(t, `{"tools":{"exec":{"host":"gateway","security":"deny"}}}`, f)
	r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
	if !strings.Contains(r.Text, "denied") {
		t.Fatalf("want a denial, got %q %+v", r.Text, r.Details)
	}
	if f.planned != 1 || f.startCount() != 0 {
		t.Fatalf("planned %d, started %d: want 1, 0", f.planned, f.startCount())
	}
}

// The host's planning error is the call's error, with its code; nothing
// starts.
func TestFakeHostPlanErrorCode(t *testing.T) {
	f := &fakeHost{planErr: apitype.Errorf(apitype.CodeNodeUnavailable, "no node"), startErr: []error{errors.New("must not start")}}
	e := fakeEngine(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`, f)
	r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
	if errorCode(r) != apitype.CodeNodeUnavailable || f.startCount() != 0 {
		t.Fatalf("code %q, started %d: %q", errorCode(r), f.startCount(), r.Text)
	}
}

// A start that fails is a failed run with the host's reason, and its
// session is gone; a session id the host already keeps
// (host.ErrSessionIDInUse, matched by code) is retried once with a fresh
// id.
func TestFakeHostStartErrors(t *testing.T) {
	f := &fakeHost{startErr: []error{errors.New("the host refused")}}
	e := fakeEngine(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`, f)
	r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
	d, ok := r.Details.(*apitype.ExecDetails)
	if !ok || d.Status != "failed" || d.Reason != "the host refused" || f.startCount() != 1 {
		t.Fatalf("started %d: %q %+v", f.startCount(), r.Text, r.Details)
	}
	if ids := e.Sessions(); len(ids) != 0 {
		t.Fatalf("a failed start left sessions %v", ids)
	}

	inUse := &apitype.Error{Code: apitype.NodeSessionIDInUse, Message: "INVALID_REQUEST: session id in use"}
	f2 := &fakeHost{startErr: []error{inUse, errors.New("second refusal")}}
	e2 := fakeEngine(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`, f2)
	r = e2.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
	d, ok = r.Details.(*apitype.ExecDetails)
	if !ok || d.Reason != "second refusal" || f2.startCount() != 2 || f2.starts[0].ID == f2.starts[1].ID {
		t.Fatalf("want one retry with a fresh id; starts %d: %q", f2.startCount(), r.Text)
	}
	// Another error with the same text but another code is not retried:
	// the class is the code, never the message.
	f3 := &fakeHost{startErr: []error{errors.New("INVALID_REQUEST: session id in use")}}
	e3 := fakeEngine(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`, f3)
	e3.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
	if f3.startCount() != 1 {
		t.Fatalf("an error that only reads like a clash was retried (%d starts)", f3.startCount())
	}
}

// Planning honours the caller's context: a cancelled call stops a docker
// sandbox's preparation. Stand-in: no docker engine runs here, so a fake
// `docker` executable on PATH answers `docker version` and blocks on
// every other command (as a docker create that hangs would).
func TestPlanCancelStopsDocker(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\nif [ \"$1\" = version ]; then echo 27.0.0; exit 0; fi\necho \"$@\" >> " + filepath.Join(bin, "calls") + "\nexec sleep 600\n"
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	home := t.TempDir()
	seedLoginCache(home)
	cfg, err := config.Parse([]byte(`{"sandbox":{"mode":"all","backend":"docker"}}`))
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	e, err := New(Options{Home: home, Config: cfg, Workdir: ws, SupervisorArgv: []string{os.Args[0], "supervise"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	type res struct {
		pl  *plan
		err *apitype.Error
	}
	done := make(chan res, 1)
	go func() {
		pl, aerr := e.plan(ctx, "main", apitype.ExecParams{Command: "echo hi"}, ws)
		done <- res{pl, aerr}
	}()
	// Cancel once the fake docker was asked something besides its
	// version: planning is inside the backend's preparation.
	deadline := time.Now().Add(60 * time.Second * slowScale())
	for {
		if b, _ := os.ReadFile(filepath.Join(bin, "calls")); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake docker was never asked to prepare the sandbox")
		}
		select {
		case r := <-done:
			t.Fatalf("plan ended before preparing the sandbox: %+v", r.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	select {
	case r := <-done:
		if r.err == nil || r.err.Code != apitype.CodeSandboxUnavail {
			t.Fatalf("want sandbox_unavailable after the cancel, got %+v", r.err)
		}
	case <-time.After(30 * time.Second * slowScale()):
		t.Fatal("plan still waits for docker 30 s after its caller cancelled")
	}
}

// slowScale is CONCH_TEST_SLOW as a factor (at least 1).
func slowScale() time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv("CONCH_TEST_SLOW"), 64); err == nil && f > 1 {
		return time.Duration(f)
	}
	return 1
}

// Conch stopping is not the caller giving up: planning goes on (the run
// then continues in the background, as a started one does).
func TestCallerContextIgnoresStopping(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.Background())
	ctx, done := callerContext(parent)
	defer done()
	cancel(ErrStopping)
	select {
	case <-ctx.Done():
		t.Fatal("planning was cancelled by conch stopping")
	default:
	}
	parent2, cancel2 := context.WithCancel(context.Background())
	ctx2, done2 := callerContext(parent2)
	defer done2()
	cancel2()
	select {
	case <-ctx2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the caller's cancel did not reach planning")
	}
}

// A start that fails gives back its quotas.maxRunning slot: an agent at
// the cap of one still gets each next call to its host. A retry with the
// idempotency key of a call whose start failed replays that failure
// without starting again.
func TestFakeHostFailedStartReleasesQuota(t *testing.T) {
	f := &fakeHost{startErr: []error{errors.New("the host refused")}}
	e := fakeEngine(t, `{"quotas":{"maxRunning":1},"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`, f)
	for i := range 3 {
		r := e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo hi"})
		if d, ok := r.Details.(*apitype.ExecDetails); !ok || d.Status != "failed" {
			t.Fatalf("call %d: %q (a slot kept by a failed start refuses with quota_exceeded)", i+1, r.Text)
		}
	}
	if f.startCount() != 3 || e.admission.Admitted("main") != 0 || len(e.Sessions()) != 0 {
		t.Fatalf("started %d, slots held %d, sessions %v", f.startCount(), e.admission.Admitted("main"), e.Sessions())
	}
	p := apitype.ExecParams{Command: "echo hi", IdempotencyKey: "k"}
	r1 := e.Exec(context.Background(), "main", p)
	r2 := e.Exec(context.Background(), "main", p)
	if r1.Text != r2.Text || f.startCount() != 4 {
		t.Fatalf("retry: %q then %q, started %d (want 4)", r1.Text, r2.Text, f.startCount())
	}
}
