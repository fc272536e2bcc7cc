package registry_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/registry"
)

// The first call with a key runs and records its result; a retry with
// the same request waits for it and answers from it; the key for another
// request conflicts.
func ExampleIdemStore() {
	dir, _ := os.MkdirTemp("", "idem")
	defer os.RemoveAll(dir)
	store, _ := registry.OpenIdem(filepath.Join(dir, "idempotency.json"))
	never := func(*registry.IdemEntry) bool { return false }

	en, outcome := store.Begin("main", "k1", "fingerprint-a", 0, never)
	fmt.Println(outcome == registry.IdemFirst)
	store.Finish(en, "s1", apitype.Result{Text: "hi"}, true)

	retry, outcome := store.Begin("main", "k1", "fingerprint-a", 0, never)
	retry.Wait(context.Background())
	fmt.Println(outcome == registry.IdemReplay, retry.Result().Text)

	_, outcome = store.Begin("main", "k1", "fingerprint-b", 0, never)
	fmt.Println(outcome == registry.IdemConflict)
	// Output:
	// true
	// true hi
	// true
}

// A call admitted under a cap of running sessions holds its slot until
// its session is registered (and counted by running) or failed to start.
func ExampleAdmission() {
	var a registry.Admission
	running := func() int { return 1 } // the caller's count of running sessions
	release, _, ok := a.Admit("main", 2, running)
	fmt.Println(ok)
	_, n, ok := a.Admit("main", 2, running)
	fmt.Println(ok, n)
	release()
	_, _, ok = a.Admit("main", 2, running)
	fmt.Println(ok)
	// Output:
	// true
	// false 2
	// true
}
