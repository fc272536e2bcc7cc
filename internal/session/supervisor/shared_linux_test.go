package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// startShared starts the test binary as a shared supervisor on a fresh home;
// the shared supervisor is retired when the test ends.
func startShared(t *testing.T) (*Shared, string) {
	t.Helper()
	if !CgroupAvailable() {
		t.Skip("a shared supervisor needs session cgroups, and none can be created here (no writable cgroup v2, v1 pids or freezer)")
	}
	home := t.TempDir()
	h, err := StartShared([]string{os.Args[0], "supervise"}, home, []string{"PATH=" + os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		select {
		case <-h.Exited():
		case <-time.After(10 * time.Second):
			t.Errorf("host %d did not exit after its sessions ended", h.PID())
			syscall.Kill(h.PID(), syscall.SIGKILL)
		}
	})
	return h, home
}

func sharedSpec(home string, spec proto.Spec) proto.Spec {
	if spec.ID == "" {
		counter++ // callers without an id are not concurrent
		spec.ID = fmt.Sprintf("h%d", counter)
	}
	spec.Socket = filepath.Join(home, "run", "s", spec.ID+".sock")
	return testDefaults(home, spec)
}

// lastExit drains hd's events and returns the last end state among them
// (nil if none came).
func lastExit(hd *proto.Handle) *proto.Exit {
	var ex *proto.Exit
	for ev := range hd.Events {
		if ev.Exit != nil {
			ex = ev.Exit
		}
	}
	return ex
}

func output(dir string) string {
	var b strings.Builder
	journal.Read(proto.JournalDir(dir), 0, func(c journal.Chunk) error { b.Write(c.Data); return nil })
	return b.String()
}

// TestSharedManySessions: one shared supervisor runs many sessions at once, each with its
// own journal, meta.json, exit.json and cgroup, all served on the shared supervisor's
// one control socket, and exits once retired and idle.
func TestSharedManySessions(t *testing.T) {
	h, home := startShared(t)
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := sharedSpec(home, proto.Spec{ID: fmt.Sprintf("many%d", i), Argv: []string{"/bin/sh", "-c", fmt.Sprintf("echo out%d; echo err%d >&2; exit %d", i, i, i%7)}})
			hd, err := h.Commit(spec, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			if hd.SupervisorPID != h.PID() || hd.Socket != filepath.Join(home, "run", "s", fmt.Sprintf("host-%d.sock", h.PID())) {
				errs <- fmt.Errorf("session %d: supervisor %d socket %s", i, hd.SupervisorPID, hd.Socket)
			}
			ex := lastExit(hd)
			dir := proto.SessionDir(home, spec.ID)
			switch {
			case ex == nil || !ex.Final || *ex.ExitCode != i%7:
				errs <- fmt.Errorf("session %d: end %+v", i, ex)
			case !strings.Contains(output(dir), fmt.Sprintf("out%d\n", i)) || !strings.Contains(output(dir), fmt.Sprintf("err%d\n", i)):
				errs <- fmt.Errorf("session %d: output %q", i, output(dir))
			}
			if meta := hd.Meta; meta == nil || meta.SupervisorPID != h.PID() || meta.Socket != hd.Socket || meta.Cgroup == nil {
				errs <- fmt.Errorf("session %d: meta %+v", i, meta)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if h.Started() != n {
		t.Errorf("host started %d sessions, want %d", h.Started(), n)
	}
	h.Close()
	select {
	case <-h.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("a retired idle host did not exit")
	}
	// Nothing was released: every session's files are written.
	for i := 0; i < n; i++ {
		dir := proto.SessionDir(home, fmt.Sprintf("many%d", i))
		var meta proto.Meta
		if err := fsutil.ReadJSON(proto.MetaPath(dir), &meta); err != nil || meta.SupervisorPID != h.PID() || meta.Cgroup == nil {
			t.Errorf("session %d: meta.json %+v %v", i, meta, err)
		}
		if ex, ok, err := proto.ReadExit(dir); !ok || !ex.Final || *ex.ExitCode != i%7 {
			t.Errorf("session %d: exit.json %+v %v", i, ex, err)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "run", "s", fmt.Sprintf("host-%d.sock", h.PID()))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host socket left behind: %v", err)
	}
	if _, err := h.Commit(sharedSpec(home, proto.Spec{Argv: []string{"true"}}), time.Second); !errors.Is(err, ErrSharedGone) {
		t.Errorf("commit to a retired host: %v", err)
	}
}

// TestSharedSessionsApart: what one session of a shared supervisor does (a daemonised
// grandchild, a kill) stays in that session; requests on the shared socket
// reach the session they name; the command sees none of the shared supervisor's
// descriptors and SIGPIPE at its default.
func TestSharedSessionsApart(t *testing.T) {
	h, home := startShared(t)
	tag := fmt.Sprintf("%d.%d", 980, os.Getpid()%1000)
	keep := sharedSpec(home, proto.Spec{Stdin: "open", Argv: []string{"/bin/sh", "-c", "read x; echo got $x; sleep " + tag}})
	hk, err := h.Commit(keep, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Ends at once, leaving a setsid double-forked sleep behind.
	daemon := sharedSpec(home, proto.Spec{Argv: []string{"/bin/sh", "-c", "(setsid sleep " + tag + " &); ls /proc/self/fd; grep SigIgn /proc/self/status"}})
	hd, err := h.Commit(daemon, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ex := lastExit(hd)
	if ex == nil || ex.DescendantsKilled != 1 {
		t.Fatalf("the daemonised grandchild was not ended with its session: %+v", ex)
	}
	out := output(proto.SessionDir(home, daemon.ID))
	// ls lists 0, 1, 2 and the directory it reads (3).
	if fds := strings.Fields(out[:strings.Index(out, "SigIgn")]); strings.Join(fds, " ") != "0 1 2 3" {
		t.Errorf("the command inherited descriptors: %q", fds)
	}
	ign, _ := strconv.ParseUint(strings.TrimSpace(out[strings.Index(out, "SigIgn:")+7:]), 16, 64)
	if ign&(1<<(syscall.SIGPIPE-1)) != 0 {
		t.Errorf("SIGPIPE is ignored in the command: %s", out)
	}
	// The other session is untouched: its shell (waiting in read, its
	// command line names the tag) is the one match left.
	if left := alive("sleep " + tag); len(left) != 1 || left[0] != strconv.Itoa(hk.PID) {
		t.Fatalf("processes running: %v, want the kept session's shell %d", left, hk.PID)
	}
	if _, err := Call(hk.Socket, proto.Request{Op: "write", Session: keep.ID, Data: []byte("one\n")}); err != nil {
		t.Fatal(err)
	}
	// The shared supervisor forgets an ended session a moment after its end state.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := Call(hk.Socket, proto.Request{Op: "status", Session: daemon.ID})
		if errors.Is(err, ErrUnreachable) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of an ended session on the host socket: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := Call(hk.Socket, proto.Request{Op: "status", Session: "nope"}); !errors.Is(err, ErrUnreachable) {
		t.Errorf("status of an unknown session: %v", err)
	}
	st, err := Call(hk.Socket, proto.Request{Op: "status", Session: keep.ID})
	if err != nil || st.Status.PID != hk.PID {
		t.Fatalf("status: %+v %v", st, err)
	}
	ch, stop, err := Subscribe(hk.Socket, keep.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := Call(hk.Socket, proto.Request{Op: "kill", Session: keep.ID, By: "operator"}); err != nil {
		t.Fatal(err)
	}
	var kex *proto.Exit
	for ev := range ch {
		if ev.Exit != nil {
			kex = ev.Exit
		}
	}
	if kex == nil || kex.State != proto.StateKilled || *kex.KilledBy != "operator" {
		t.Fatalf("kill through the host socket: %+v", kex)
	}
	if got := output(proto.SessionDir(home, keep.ID)); got != "got one\n" {
		t.Errorf("kept session output %q", got)
	}
	if left := alive("sleep " + tag); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
}

// TestSharedNeedsCgroup: a session that may not have a cgroup is refused
// by a shared supervisor (the engine gives it a supervisor of its own).
func TestSharedNeedsCgroup(t *testing.T) {
	h, home := startShared(t)
	_, err := h.Commit(sharedSpec(home, proto.Spec{NoCgroup: true, Argv: []string{"true"}}), 10*time.Second)
	if !errors.Is(err, ErrNeedsCgroup) {
		t.Fatalf("err = %v", err)
	}
	// The shared supervisor still serves others.
	hd, err := h.Commit(sharedSpec(home, proto.Spec{Argv: []string{"true"}}), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range hd.Events {
	}
}

// TestSharedDeath: a shared supervisor that dies takes the supervision of all its
// sessions: their event streams end without an end state, and Sweep ends
// what they left, from the meta the engine was handed (a shared supervisor that dies
// at once has written no meta.json) or, with nothing but the session id,
// SweepSession.
func TestSharedDeath(t *testing.T) {
	h, home := startShared(t)
	tag := fmt.Sprintf("%d.%d", 981, os.Getpid()%1000)
	var metas []proto.Meta
	var ids []string
	var hds []*proto.Handle
	for i := 0; i < 3; i++ {
		spec := sharedSpec(home, proto.Spec{Argv: []string{"/bin/sh", "-c", "sleep " + tag}})
		start := time.Now()
		hd, err := h.Commit(spec, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if hd.Meta == nil || hd.Meta.PID != hd.PID || hd.Meta.Cgroup == nil {
			t.Fatalf("ready report's meta: %+v", hd.Meta)
		}
		// The shared supervisor writes meta.json filesDelay after the start. On a
		// loaded machine the commit alone may take that long: then the
		// file may rightly be there, and only a file found sooner is
		// wrong.
		_, err = os.Stat(proto.MetaPath(proto.SessionDir(home, spec.ID)))
		if took := time.Since(start); err == nil && took < filesDelay {
			t.Errorf("a host wrote meta.json of a session that had started %v before", took)
		}
		metas, ids, hds = append(metas, *hd.Meta), append(ids, spec.ID), append(hds, hd)
	}
	syscall.Kill(h.PID(), syscall.SIGKILL)
	for _, hd := range hds {
		for ev := range hd.Events {
			if ev.Exit != nil {
				t.Fatalf("an end state from a killed host: %+v", ev.Exit)
			}
		}
	}
	// Not sent, or sent as the shared supervisor's last descriptors closed.
	if _, err := h.Commit(sharedSpec(home, proto.Spec{Argv: []string{"true"}}), 2*time.Second); !errors.Is(err, ErrSharedGone) && !errors.Is(err, ErrSharedDied) {
		t.Errorf("commit to a dead host: %v", err)
	}
	for _, m := range metas[:2] {
		Sweep(m)
	}
	if n := SweepSession(ids[2]); n == 0 {
		t.Errorf("SweepSession(%s) found nothing", ids[2])
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(alive("sleep "+tag)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := alive("sleep " + tag); len(left) != 0 {
		t.Fatalf("left after sweep: %v", left)
	}
}

// TestSharedPipeHeldOutside: a process that left the session's cgroup and
// still holds its output pipe does not keep the session, or a reader in
// the shared supervisor, alive: the session ends, the pipe is closed on it, and the
// shared supervisor goes once retired.
func TestSharedPipeHeldOutside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("moving a process to another cgroup needs root")
	}
	h, home := startShared(t)
	mnt := cgroupMountsOnce()["cgroup2"]
	// The grandchild moves itself to the shared supervisor's own cgroup (the parent
	// of the session's), then writes after the session has ended.
	cmd := fmt.Sprintf(`(sh -c 'echo $$ > %s$(dirname $(grep "^0::" /proc/self/cgroup | cut -d: -f3))/cgroup.procs && sleep 3; echo late' &); echo early`, mnt)
	spec := sharedSpec(home, proto.Spec{Argv: []string{"/bin/sh", "-c", cmd}})
	start := time.Now()
	hd, err := h.Commit(spec, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ex := lastExit(hd)
	dir := proto.SessionDir(home, spec.ID)
	var meta proto.Meta
	fsutil.ReadJSON(proto.MetaPath(dir), &meta)
	if mnt == "" || meta.Cgroup == nil || meta.Cgroup.V2 == "" {
		t.Skip("the session has no cgroup v2 directory to leave")
	}
	if ex == nil || !ex.Final || time.Since(start) > 8*time.Second {
		t.Fatalf("end %+v after %v", ex, time.Since(start))
	}
	if out := output(dir); !strings.Contains(out, "early") || strings.Contains(out, "late") {
		t.Errorf("output %q", out)
	}
	time.Sleep(3 * time.Second) // the grandchild writes now, into a closed pipe
	log, _ := os.ReadFile(proto.LogPath(dir))
	if !strings.Contains(string(log), "closing") || strings.Contains(string(log), "holding") {
		t.Errorf("supervisor.log:\n%s", log)
	}
	h.Close()
	select {
	case <-h.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("the host did not exit")
	}
}

// TestSharedDefersFiles: a shared supervisor writes a session's meta.json and state.json
// only once it has run for a while, ends unreleased, or an engine asks
// (FlushShared); a session released when it ended leaves no file at all.
func TestSharedDefersFiles(t *testing.T) {
	h, home := startShared(t)
	state := json.RawMessage(`{"agent":"a1","command":"x"}`)
	commit := func(id string, argv ...string) *proto.Handle {
		t.Helper()
		dir := proto.SessionDir(home, id)
		if err := os.MkdirAll(dir, 0o700); err != nil { // the engine's reservation
			t.Fatal(err)
		}
		hd, err := h.Commit(sharedSpec(home, proto.Spec{ID: id, Argv: argv, State: state}), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return hd
	}
	end := func(hd *proto.Handle) {
		t.Helper()
		if ex := lastExit(hd); ex == nil || !ex.Final {
			t.Fatalf("no end state: %+v", ex)
		}
	}
	names := func(id string) string {
		ents, _ := os.ReadDir(proto.SessionDir(home, id))
		var n []string
		for _, e := range ents {
			n = append(n, e.Name())
		}
		return strings.Join(n, " ")
	}

	relStart := time.Now()
	released := commit("released", "/bin/sh", "-c", "true")
	end(released)
	released.Release()
	// A session released later than filesDelay after its start has
	// rightly had its files written (a loaded machine); only one released
	// sooner must leave none.
	relTook := time.Since(relStart)
	kept := commit("kept", "/bin/sh", "-c", "echo kept")
	end(kept)
	running := commit("running", "/bin/sh", "-c", "sleep 30")
	flushed := commit("flushed", "/bin/sh", "-c", "sleep 30")
	FlushShared(filepath.Join(home, "run", "s"))
	if got := names("flushed"); got != "meta.json state.json" {
		t.Errorf("right after FlushHosts: %q, want meta.json and state.json", got)
	}
	if got := names("running"); got != "meta.json state.json" {
		t.Errorf("FlushHosts flushed only one session: %q", got)
	}
	// The kept session's files are written filesDelay after its start,
	// which came after the released session's: once they are there, the
	// released session's delay has passed too.
	deadline := time.Now().Add(30 * time.Second)
	for names("kept") != "000001.seg exit.json meta.json state.json" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := names("kept"); got != "000001.seg exit.json meta.json state.json" {
		t.Errorf("an unreleased ended session: %q", got)
	}
	if got := names("released"); got != "" && relTook < filesDelay {
		t.Errorf("a session released %v after its start left files: %q", relTook, got)
	} else if got != "" {
		t.Logf("released %v after its start, past filesDelay: its files (%q) prove nothing", relTook, got)
	}
	var st map[string]string
	if err := fsutil.ReadJSON(filepath.Join(proto.SessionDir(home, "kept"), "state.json"), &st); err != nil || st["agent"] != "a1" {
		t.Errorf("state.json from the spec: %v %v", st, err)
	}
	// The engine's own state.json is not replaced.
	late := proto.SessionDir(home, "late")
	os.MkdirAll(late, 0o700)
	if err := fsutil.WriteJSON(filepath.Join(late, "state.json"), map[string]string{"agent": "engine"}); err != nil {
		t.Fatal(err)
	}
	end(commit("late", "/bin/sh", "-c", "true"))
	FlushShared(filepath.Join(home, "run", "s"))
	if err := fsutil.ReadJSON(filepath.Join(late, "state.json"), &st); err != nil || st["agent"] != "engine" {
		t.Errorf("the engine's state.json was replaced: %v %v", st, err)
	}
	for _, hd := range []*proto.Handle{running, flushed} {
		Call(hd.Socket, proto.Request{Op: "kill", Session: hd.Meta.ID, By: "agent"})
		end(hd)
	}
}

// TestSharedLargeSpec: a spec too large for the shared supervisor's message goes on a
// pipe of its own and runs the same.
func TestSharedLargeSpec(t *testing.T) {
	h, home := startShared(t)
	big := strings.Repeat("x", 3*maxInlineSpec/2)
	for _, env := range [][]string{{"PATH=" + os.Getenv("PATH")}, {"PATH=" + os.Getenv("PATH"), "BIG=" + big}} {
		spec := sharedSpec(home, proto.Spec{Argv: []string{"/bin/sh", "-c", `printf %s "${#BIG}"`}, Env: env})
		if b, _ := encodeSpec(spec); (len(b) > maxInlineSpec) != (len(env) == 2) {
			t.Fatalf("spec of %d bytes does not test what it should", len(b))
		}
		hd, err := h.Commit(spec, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for range hd.Events {
		}
		want := "0"
		if len(env) == 2 {
			want = fmt.Sprint(len(big))
		}
		if got := output(proto.SessionDir(home, spec.ID)); got != want {
			t.Errorf("spec of %d env entries: output %q, want %q", len(env), got, want)
		}
	}
}

// A shared supervisor's session whose command merely names a failure class (here in
// its path) fails as what it is, a spawn failure: not "shared supervisor out of
// descriptors" (which retires the shared supervisor and starts the command again
// elsewhere), not "needs a cgroup".
func TestSharedStartErrorByCode(t *testing.T) {
	h, home := startShared(t)
	for _, name := range []string{syscall.EMFILE.Error(), ErrNeedsCgroup.Error(), "open pty"} {
		spec := sharedSpec(home, proto.Spec{Argv: []string{"/nonexistent/" + name}})
		_, err := h.Commit(spec, 30*time.Second)
		if err == nil {
			t.Fatalf("%q started", name)
		}
		for _, class := range []error{ErrSharedGone, ErrNeedsCgroup, ErrSharedDied, ErrOpenPTY, syscall.EMFILE} {
			if errors.Is(err, class) {
				t.Errorf("spawn of %q failed as %v: %v", name, class, err)
			}
		}
	}
}
