package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/conchsh/conch/internal/approvals"
	"github.com/conchsh/conch/internal/auth"
	"github.com/conchsh/conch/internal/ledger"
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
