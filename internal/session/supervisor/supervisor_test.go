package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// The test binary doubles as the supervisor: `<test> supervise ...`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		os.Exit(Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

var counter int

// testDefaults fills in what the tests' specs leave out: the home as the
// working directory, stdin closed, a 300 ms kill grace.
func testDefaults(home string, spec proto.Spec) proto.Spec {
	if spec.Dir == "" {
		spec.Dir = home
	}
	if spec.Stdin == "" {
		spec.Stdin = "closed"
	}
	if spec.KillGraceMs == 0 {
		spec.KillGraceMs = 300
	}
	return spec
}

func launch(t *testing.T, spec proto.Spec) (*proto.Handle, string) {
	t.Helper()
	home := t.TempDir()
	counter++
	spec.ID = fmt.Sprintf("t%d", counter)
	if spec.Socket == "" {
		spec.Socket = filepath.Join(home, spec.ID+".sock")
	}
	spec = testDefaults(home, spec)
	h, err := Launch([]string{os.Args[0], "supervise"}, home, spec, []string{"PATH=" + os.Getenv("PATH")}, 10*time.Second)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	return h, proto.SessionDir(home, spec.ID)
}

// final drains events until the end state.
func final(t *testing.T, h *proto.Handle, within time.Duration) proto.Exit {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-h.Events:
			if !ok {
				t.Fatal("events closed without an end state")
			}
			if ev.Exit != nil {
				return *ev.Exit
			}
		case <-timeout:
			t.Fatalf("no end state within %v", within)
		}
	}
}

func alive(pattern string) []string {
	out, _ := exec.Command("pgrep", "-f", pattern).Output()
	return strings.Fields(string(out))
}

// waitAlive waits until at least n processes match pattern (a
// command-line regexp for pgrep -f), and fails after a deadline generous
// enough for a loaded machine.
func waitAlive(t *testing.T, pattern string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := alive(pattern)
		if len(got) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes match %q, want %d", len(got), pattern, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExitRecord(t *testing.T) {
	h, dir := launch(t, proto.Spec{Argv: []string{"/bin/sh", "-c", "printf hello; printf world >&2; exit 3"}})
	ex := final(t, h, 10*time.Second)
	if ex.State != proto.StateExited || *ex.ExitCode != 3 || ex.OutputBytes != 10 || !ex.Final {
		t.Fatalf("exit = %+v", ex)
	}
	// The digest covers the journal bytes in arrival order (the two
	// pipes may deliver in either order).
	h256 := sha256.New()
	journal.Read(proto.JournalDir(dir), 0, func(c journal.Chunk) error { h256.Write(c.Data); return nil })
	if ex.OutputSha256 != hex.EncodeToString(h256.Sum(nil)) {
		t.Fatalf("sha = %s", ex.OutputSha256)
	}
	onDisk, ok, err := proto.ReadExit(dir)
	if !ok || err != nil || onDisk.OutputSha256 != ex.OutputSha256 {
		t.Fatalf("exit.json: %+v %v %v", onDisk, ok, err)
	}
	byStream := map[journal.Stream]string{}
	journal.Read(proto.JournalDir(dir), 0, func(c journal.Chunk) error {
		byStream[c.Stream] += string(c.Data)
		return nil
	})
	if byStream[journal.Stdout] != "hello" || byStream[journal.Stderr] != "world" {
		t.Fatalf("streams = %v", byStream)
	}
	var meta proto.Meta
	if err := fsutil.ReadJSON(proto.MetaPath(dir), &meta); err != nil || meta.PID != h.PID || meta.SupervisorPID != h.SupervisorPID {
		t.Fatalf("meta %+v %v", meta, err)
	}
	for _, f := range []string{proto.MetaPath(dir), proto.ExitPath(dir)} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v %v", f, fi.Mode(), err)
		}
	}
}

func TestSpawnError(t *testing.T) {
	home := t.TempDir()
	_, err := Launch([]string{os.Args[0], "supervise"}, home, proto.Spec{ID: "bad", Argv: []string{"/nonexistent/zsh", "-c", "true"}, Dir: home, Stdin: "closed", Socket: filepath.Join(home, "s.sock")}, nil, 10*time.Second)
	if err == nil || err.Error() != "spawn /nonexistent/zsh: no such file or directory" {
		t.Fatalf("err = %v", err)
	}
}

// Both containment modes must end a tree with children that left the
// process group (setsid) or were orphaned (double fork).
func TestKillTree(t *testing.T) {
	for _, noCgroup := range []bool{false, true} {
		t.Run(fmt.Sprintf("noCgroup=%v", noCgroup), func(t *testing.T) {
			tag := fmt.Sprintf("%d.%d", 950+counter, os.Getpid()%1000)
			h, dir := launch(t, proto.Spec{NoCgroup: noCgroup, Argv: []string{"/bin/sh", "-c", "sleep " + tag + " & setsid sleep " + tag + " & (sleep " + tag + " &); sleep " + tag}})
			var meta proto.Meta
			fsutil.ReadJSON(proto.MetaPath(dir), &meta)
			if noCgroup && meta.Cgroup != nil {
				t.Fatalf("cgroup used: %+v", meta.Cgroup)
			}
			// Kill once the four sleeps run: alive("sleep "+tag) counts
			// the shells too (their command lines name the sleeps), and
			// may reach four while a subshell has yet to start its
			// sleep, which the kill then finds as a shell.
			waitAlive(t, "^sleep "+regexp.QuoteMeta(tag)+"$", 4)
			// killedBy is a closed set: another cause is refused and
			// kills nothing.
			if _, err := Call(meta.Socket, proto.Request{Op: "kill", By: "nobody"}); err == nil || !strings.Contains(err.Error(), `unknown cause "nobody"`) {
				t.Fatalf("kill by an unknown cause: %v", err)
			}
			if _, err := Call(meta.Socket, proto.Request{Op: "kill", By: "operator"}); err != nil {
				t.Fatal(err)
			}
			ex := final(t, h, 10*time.Second)
			// sh, plus four sleeps: background, setsid, orphaned, foreground.
			if ex.State != proto.StateKilled || *ex.KilledBy != "operator" || ex.DescendantsKilled != 4 {
				t.Fatalf("exit = %+v", ex)
			}
			if left := alive("sleep " + tag); len(left) != 0 {
				t.Fatalf("left: %v", left)
			}
		})
	}
}

func TestControlSocket(t *testing.T) {
	// The command waits for the file "end" after stdin is closed, so the
	// supervisor is still there for the calls that follow the close.
	end := filepath.Join(t.TempDir(), "end")
	h, dir := launch(t, proto.Spec{Stdin: "open", Argv: []string{"/bin/sh", "-c", "read a; echo got $a; read b; echo got $b; while [ ! -e " + end + " ]; do sleep 0.01; done"}})
	var meta proto.Meta
	fsutil.ReadJSON(proto.MetaPath(dir), &meta)
	st, err := Call(meta.Socket, proto.Request{Op: "status"})
	if err != nil || st.Status.Stdin != "open" || st.Status.PID != h.PID {
		t.Fatalf("status %+v %v", st.Status, err)
	}
	if _, err := Call(meta.Socket, proto.Request{Op: "write", Data: []byte("x\n")}); err != nil {
		t.Fatal(err)
	}
	if _, err := Call(meta.Socket, proto.Request{Op: "closeStdin"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Call(meta.Socket, proto.Request{Op: "write", Data: []byte("y\n")}); err == nil || !strings.Contains(err.Error(), "stdin is closed") {
		t.Fatalf("write after close: %v", err)
	}
	if _, err := Call(meta.Socket, proto.Request{Op: "dance"}); err == nil || err.Error() != `unknown op "dance"` {
		t.Fatalf("unknown op: %v", err)
	}
	if err := os.WriteFile(end, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ex := final(t, h, 10*time.Second)
	var out, in string
	journal.ReadAll(proto.JournalDir(dir), 0, func(c journal.Chunk) error {
		if c.Stream == journal.Input {
			in += string(c.Data)
		} else {
			out += string(c.Data)
		}
		return nil
	})
	if out != "got x\ngot\n" || in != "x\n" || *ex.ExitCode != 0 {
		t.Fatalf("out %q in %q exit %+v", out, in, ex)
	}
	// The supervisor removes its socket on its way out.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(meta.Socket); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("socket left behind")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTimeoutAndShutdown(t *testing.T) {
	h, _ := launch(t, proto.Spec{TimeoutMs: 200, Argv: []string{"/bin/sh", "-c", "sleep 30"}})
	ex := final(t, h, 10*time.Second)
	if ex.State != proto.StateKilled || *ex.KilledBy != "timeout" || !ex.TimedOut {
		t.Fatalf("timeout: %+v", ex)
	}
	h, _ = launch(t, proto.Spec{Argv: []string{"/bin/sh", "-c", "sleep 30"}})
	p, _ := os.FindProcess(h.SupervisorPID)
	p.Signal(os.Interrupt)
	ex = final(t, h, 10*time.Second)
	if ex.State != proto.StateKilled || *ex.KilledBy != "shutdown" || ex.TimedOut {
		t.Fatalf("shutdown: %+v", ex)
	}
}

func TestSweepLost(t *testing.T) {
	tag := fmt.Sprintf("%d.%d", 970, os.Getpid()%1000)
	h, dir := launch(t, proto.Spec{Argv: []string{"/bin/sh", "-c", "setsid sleep " + tag + " & sleep " + tag}})
	var meta proto.Meta
	fsutil.ReadJSON(proto.MetaPath(dir), &meta)
	// Both sleeps run (the shell's command line names them too).
	waitAlive(t, "^sleep "+regexp.QuoteMeta(tag)+"$", 2)
	p, _ := os.FindProcess(h.SupervisorPID)
	p.Kill()
	for range h.Events {
	}
	if n := Sweep(meta); n < 2 {
		t.Errorf("Sweep found %d", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(alive("sleep "+tag)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := alive("sleep " + tag); len(left) != 0 {
		t.Fatalf("left after sweep: %v", left)
	}
}
