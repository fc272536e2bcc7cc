package supervisor

import (
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFullDiskKillAfterEndAndExitInMemory: a command ends while its
// output is held back by a full disk. A kill then ends the wait for space
// at once (it used to take 60 s) and the end state counts the output
// given up. exit.json cannot be written: the supervisor stays, serves
// its meta and end state on the socket, and writes exit.json, then exits,
// once space is back.
func TestFullDiskKillAfterEndAndExitInMemory(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	home := filepath.Join(mnt, "home")
	os.MkdirAll(home, 0o700)
	gate := filepath.Join(t.TempDir(), "go")
	spec := testDefaults(home, proto.Spec{ID: "full1", Argv: []string{"/bin/sh", "-c", "until [ -e " + gate + " ]; do sleep 0.02; done; head -c 100000 /dev/zero | tr '\\0' x; echo; echo done"},
		Socket: filepath.Join(t.TempDir(), "s.sock"), NoCgroup: true})
	h, err := Launch([]string{os.Args[0], "supervise"}, home, spec, []string{"PATH=" + os.Getenv("PATH")}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	dir := proto.SessionDir(home, spec.ID)
	if _, err := os.Stat(proto.MetaPath(dir)); err != nil {
		t.Fatalf("meta.json: %v", err)
	}

	// Fill the disk to the last page, then let the command print.
	filler := filepath.Join(mnt, "filler")
	f, _ := os.Create(filler)
	for {
		if _, err := f.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	for {
		if _, err := f.Write(make([]byte, 512)); err != nil {
			break
		}
	}
	f.Close()
	os.WriteFile(gate, nil, 0o600)

	// Held back, and the command has ended.
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := Call(h.Socket, proto.Request{Op: "status"})
		if err == nil && rep.Status.JournalError != "" && rep.Status.Ending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no held-back end: %+v %v", rep.Status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	if _, err := Call(h.Socket, proto.Request{Op: "kill", By: "agent"}); err != nil {
		t.Fatal(err)
	}
	ex := final(t, h, 30*time.Second)
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the end took %v after the kill", took)
	}
	if ex.State != proto.StateExited || ex.UnrecordedBytes <= 0 || !ex.Final {
		t.Fatalf("end state %+v", ex)
	}
	if _, err := os.Stat(proto.ExitPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("exit.json on a full disk: %v", err)
	}
	// The supervisor stays and serves the session.
	rep, err := Call(h.Socket, proto.Request{Op: "meta"})
	if err != nil || rep.Meta == nil || rep.Meta.ID != spec.ID {
		t.Fatalf("op meta while exit.json is owed: %+v %v", rep, err)
	}
	sub, closeSub, err := Subscribe(h.Socket, "")
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-sub; ev.Exit == nil || ev.Exit.State != proto.StateExited || ev.Exit.UnrecordedBytes != ex.UnrecordedBytes {
		t.Fatalf("a new subscriber got %+v", ev)
	}
	closeSub()

	os.Remove(filler)
	deadline = time.Now().Add(30 * time.Second)
	for !isGone(h.SupervisorPID) {
		if time.Now().After(deadline) {
			t.Fatal("the supervisor did not exit once space was back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, ok, err := proto.ReadExit(dir)
	if !ok || got.State != ex.State || got.UnrecordedBytes != ex.UnrecordedBytes || !got.Final {
		t.Fatalf("exit.json after space came back: %+v %v %v", got, ok, err)
	}
}

// isGone reports a pid that is no longer a running process (gone, or a
// zombie not reaped yet).
func isGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	stat := string(b)
	i := strings.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
