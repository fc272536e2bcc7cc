package engine

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
)

// fifoWriterBlocked reports whether a thread of this process waits in
// open(2) for a FIFO's reader; ok is false when the kernel shows no
// thread's wait channel (then it cannot tell).
func fifoWriterBlocked() (blocked, ok bool) {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "wchan"))
		w := strings.TrimSpace(string(b))
		if err != nil || w == "" || w == "0" {
			continue
		}
		ok = true
		if w == "wait_for_partner" {
			return true, true
		}
	}
	return false, ok
}

// TestIdempotencyWriteOutsideEngineLock: the idempotency file is written
// while no engine-wide lock is held, so a slow write (here one that blocks:
// its temporary file is a FIFO nobody reads) holds up only the call whose
// key it records — other calls, and the engine's session table, go on.
// The blocked call still answers only after its key is written.
func TestIdempotencyWriteOutsideEngineLock(t *testing.T) {
	e := newEngine(t)
	tmp := e.idemPath() + ".tmp"
	if err := os.MkdirAll(filepath.Dir(tmp), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(tmp, 0o600); err != nil {
		t.Fatal(err)
	}
	// On failure, a writer still blocked is let go so the engine can
	// close (opening the reader side wakes it; a read finds the end).
	t.Cleanup(func() {
		if f, err := os.OpenFile(tmp, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.SetNonblock(int(f.Fd()), false)
			io.Copy(io.Discard, f)
			f.Close()
		}
	})
	first := make(chan apitype.Result, 1)
	go func() {
		first <- e.Exec(context.Background(), "main", apitype.ExecParams{Command: "true", IdempotencyKey: "k1"})
	}()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		blocked, ok := fifoWriterBlocked()
		if blocked {
			break
		}
		if time.Now().After(deadline) {
			if !ok {
				t.Skip("the kernel shows no thread's wait channel: cannot see the blocked write")
			}
			t.Fatal("the idempotency write never blocked on the FIFO")
		}
		select {
		case r := <-first:
			t.Fatalf("the first call returned before its key was written: %q", r.Text)
		case <-time.After(10 * time.Millisecond):
		}
	}
	others := make(chan apitype.Result, 1)
	go func() {
		e.Sessions()
		others <- e.Exec(context.Background(), "main", apitype.ExecParams{Command: "echo other"})
	}()
	select {
	case r := <-others:
		if r.Text != "other" {
			t.Fatalf("other call: %q", r.Text)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("engine calls blocked while the idempotency file was being written")
	}
	select {
	case r := <-first:
		t.Fatalf("the first call returned before its key was written: %q", r.Text)
	default:
	}
	// Let the write finish: read the FIFO to its end.
	f, err := os.Open(tmp)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if !strings.Contains(string(b), `"k1"`) {
		t.Fatalf("the write did not hold the key: %s", b)
	}
	if r := <-first; r.Details.(*apitype.ExecDetails).Status != "completed" {
		t.Fatalf("first call: %q", r.Text)
	}
}
