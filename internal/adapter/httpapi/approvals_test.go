package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/store/auth"
	"github.com/conchsh/conch/internal/store/ledger"
)

func operatorCall(t *testing.T, ts *httptest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	r, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+testOperator)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// TestApprovalsStoreOpenedOnce: the server opens the approvals store once,
// however many requests use it; concurrent sets and gets of the approvals
// file (run with -race) each succeed or conflict, and every change that
// succeeded has exactly one ledger record and one policy.changed event.
func TestApprovalsStoreOpenedOnce(t *testing.T) {
	var opens atomic.Int32
	defer func(f func(string) (*approvals.Store, error)) { openApprovals = f }(openApprovals)
	openApprovals = func(home string) (*approvals.Store, error) {
		opens.Add(1)
		return approvals.OpenStore(home)
	}
	home := t.TempDir()
	srv := New(Options{Home: home, Agents: auth.Open(home), OperatorToken: testOperator, Listen: "127.0.0.1:0"})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 8 {
		wg.Add(3)
		go func() {
			defer wg.Done()
			if code, _ := operatorCall(t, ts, "GET", "/v1/approvals?state=all", ""); code != 200 {
				t.Errorf("list approvals: %d", code)
			}
		}()
		go func() {
			defer wg.Done()
			if code, _ := operatorCall(t, ts, "GET", "/v1/approvals/nope", ""); code != 404 && code != 401 {
				t.Errorf("get approval: %d", code)
			}
		}()
		go func() {
			defer wg.Done()
			_, cur := operatorCall(t, ts, "GET", "/v1/approvals-file", "")
			base, _ := cur["hash"].(string)
			file := fmt.Sprintf(`{"version":1,"agents":{"main":{"allowlist":[{"pattern":"/usr/bin/tool%d"}]}}}`, i)
			body, _ := json.Marshal(map[string]any{"file": json.RawMessage(file), "baseHash": base})
			code, m := operatorCall(t, ts, "PUT", "/v1/approvals-file", string(body))
			if code != 200 && code != 409 {
				t.Errorf("set approvals file: %d %v", code, m)
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if n := opens.Load(); n != 1 {
		t.Fatalf("the approvals store was opened %d times, want once", n)
	}
	if codes[200] == 0 {
		t.Fatalf("no set succeeded: %v", codes)
	}
	recs, err := ledger.Tail(home, 0, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	policy := 0
	for _, r := range recs {
		if r.Type == ledger.TypePolicy {
			policy++
		}
	}
	replay, _, cancel := srv.hub.subscribe(0)
	cancel()
	events := 0
	for _, e := range replay {
		if e.Type == "policy.changed" {
			events++
		}
	}
	if policy != codes[200] || events != codes[200] {
		t.Fatalf("%d sets succeeded: %d ledger policy records, %d policy.changed events", codes[200], policy, events)
	}
}

// TestApprovalsFileSetOnFullDisk: a set that cannot be written (the disk
// is full) is a server error, not the client's invalid_argument, and
// changes nothing: the file and the ledger are as before, and the same
// set succeeds once there is room. Needs root to mount a small tmpfs.
func TestApprovalsFileSetOnFullDisk(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	home := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", home).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", home).Run() })
	srv := New(Options{Home: home, Agents: auth.Open(home), OperatorToken: testOperator, Listen: "127.0.0.1:0"})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	set := func(pattern, base string) (int, map[string]any) {
		file := fmt.Sprintf(`{"version":1,"agents":{"main":{"allowlist":[{"pattern":%q}]}}}`, pattern)
		body, _ := json.Marshal(map[string]any{"file": json.RawMessage(file), "baseHash": base})
		return operatorCall(t, ts, "PUT", "/v1/approvals-file", string(body))
	}
	code, m := set("/usr/bin/first", "")
	if code != 200 {
		t.Fatalf("first set: %d %v", code, m)
	}
	base, _ := m["hash"].(string)
	records := func() int {
		recs, _ := ledger.Tail(home, 0, ledger.Filter{})
		return len(recs)
	}
	before := records()
	// Fill the disk.
	filler := filepath.Join(home, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	code, m = set("/usr/bin/second", base)
	if code < 500 {
		t.Fatalf("set on a full disk: %d %v, want a server error", code, m)
	}
	if _, cur := operatorCall(t, ts, "GET", "/v1/approvals-file", ""); cur["hash"] != base {
		t.Fatalf("the file changed: %v", cur["hash"])
	}
	if n := records(); n != before {
		t.Fatalf("%d ledger records after a failed set, %d before", n, before)
	}
	os.Remove(filler)
	if code, m := set("/usr/bin/second", base); code != 200 {
		t.Fatalf("set once there is room: %d %v", code, m)
	}
}
