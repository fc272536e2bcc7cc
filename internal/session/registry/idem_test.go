package registry

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
)

func never(*IdemEntry) bool { return false }

// TestIdemReplayAndConflict: the first call with a key runs; a retry with
// the same fingerprint waits for it and gets its result; the same key for
// another request conflicts; a result not kept frees the key.
func TestIdemReplayAndConflict(t *testing.T) {
	s, err := OpenIdem(filepath.Join(t.TempDir(), "state", "idem.json"))
	if err != nil {
		t.Fatal(err)
	}
	en, out := s.Begin("a", "k", "fp1", 1, never)
	if out != IdemFirst {
		t.Fatalf("first Begin: %v", out)
	}
	retry, out := s.Begin("a", "k", "fp1", 2, never)
	if out != IdemReplay || retry != en {
		t.Fatalf("retry: %v", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	if retry.Wait(ctx) == nil {
		t.Fatal("Wait returned before the first call finished")
	}
	cancel()
	if _, out := s.Begin("a", "k", "fp2", 3, never); out != IdemConflict {
		t.Fatalf("other fingerprint: %v", out)
	}
	if _, out := s.Begin("b", "k", "fp2", 3, never); out != IdemFirst {
		t.Fatalf("another agent's key: %v", out)
	}
	res := apitype.Result{Text: "hi", Details: map[string]string{"sessionId": "s1"}}
	if err := s.Finish(en, "s1", res, true); err != nil {
		t.Fatal(err)
	}
	if retry.Wait(context.Background()) != nil || retry.Result().Text != "hi" || retry.SessionID != "s1" {
		t.Fatalf("replay: %+v", retry.Result())
	}
	// An expired entry is dropped: the key runs again.
	if _, out := s.Begin("a", "k", "fp2", 4, func(*IdemEntry) bool { return true }); out != IdemFirst {
		t.Fatalf("after expiry: %v", out)
	}
	// A call that did not run leaves nothing.
	en, _ = s.Begin("a", "bad", "fp", 5, never)
	s.Finish(en, "", apitype.Result{Text: "error"}, false)
	if _, out := s.Begin("a", "bad", "other", 6, never); out != IdemFirst {
		t.Fatalf("a dropped key conflicts: %v", out)
	}
}

// TestIdemPersist: finished keys survive a reopen (the in-flight ones do
// not); the bare list an earlier conch wrote loads too; a damaged file
// gives an empty store and the error.
func TestIdemPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "idem.json")
	s, _ := OpenIdem(path)
	done, _ := s.Begin("a", "done", "fp", 1, never)
	s.Begin("a", "running", "fp", 2, never)
	if err := s.Finish(done, "s1", apitype.Result{Text: "out"}, true); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenIdem(path)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Len() != 1 {
		t.Fatalf("reopened store holds %d keys, want 1", s2.Len())
	}
	en, out := s2.Begin("a", "done", "fp", 9, never)
	if out != IdemReplay || en.InFlight() || en.Result().Text != "out" || en.SessionID != "s1" {
		t.Fatalf("reloaded entry: %v %+v", out, en)
	}
	legacy := filepath.Join(t.TempDir(), "legacy.json")
	fsutil.WriteJSON(legacy, []*IdemEntry{{Agent: "a", Key: "old", Fingerprint: "f", Text: "t"}})
	if s3, err := OpenIdem(legacy); err != nil || s3.Len() != 1 {
		t.Fatalf("legacy list: %v", err)
	}
	os.WriteFile(legacy, []byte("{torn"), 0o600)
	if s4, err := OpenIdem(legacy); err == nil || s4 == nil || s4.Len() != 0 {
		t.Fatalf("damaged file: %v", err)
	}
}

// TestIdemWriteOutsideLock: while one Finish's write is held up, the
// store answers other calls; the held-up Finish returns only after its
// write, and writes land in order: the file ends with the newest table.
func TestIdemWriteOutsideLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.json")
	s, _ := OpenIdem(path)
	entered := make(chan struct{}, 4)
	unblock := make(chan struct{})
	var writes atomic.Int32
	s.write = func(p string, v any) error {
		if writes.Add(1) == 1 {
			entered <- struct{}{}
			<-unblock
		}
		return fsutil.WriteJSON(p, v)
	}
	a, _ := s.Begin("a", "1", "fp", 1, never)
	finished := make(chan struct{})
	go func() { s.Finish(a, "s1", apitype.Result{Text: "one"}, true); close(finished) }()
	<-entered
	// The table is free while the write is held up.
	b, out := s.Begin("a", "2", "fp", 2, never)
	if out != IdemFirst {
		t.Fatalf("Begin during a write: %v", out)
	}
	s.Sweep(never)
	select {
	case <-finished:
		t.Fatal("Finish returned before its write")
	default:
	}
	second := make(chan struct{})
	go func() { s.Finish(b, "s2", apitype.Result{Text: "two"}, true); close(second) }()
	close(unblock)
	<-finished
	<-second
	s2, _ := OpenIdem(path)
	if s2.Len() != 2 {
		t.Fatalf("file holds %d keys, want both", s2.Len())
	}
}

// TestIdemConcurrent: many callers with one key: exactly one runs, the
// others replay its result (run with -race).
func TestIdemConcurrent(t *testing.T) {
	s, _ := OpenIdem(filepath.Join(t.TempDir(), "idem.json"))
	var runs atomic.Int32
	var wg sync.WaitGroup
	results := make([]string, 32)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "k" + string(rune('a'+i%4))
			en, out := s.Begin("a", key, "fp", int64(i), never)
			switch out {
			case IdemFirst:
				runs.Add(1)
				s.Finish(en, "", apitype.Result{Text: key}, true)
				results[i] = key
			case IdemReplay:
				en.Wait(context.Background())
				results[i] = en.Result().Text
			default:
				t.Errorf("call %d: %v", i, out)
			}
		}()
	}
	wg.Wait()
	if runs.Load() != 4 {
		t.Fatalf("%d first calls for 4 keys", runs.Load())
	}
	for i, r := range results {
		if want := "k" + string(rune('a'+i%4)); r != want {
			t.Fatalf("call %d got %q, want %q", i, r, want)
		}
	}
}
