package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/base/guard"
)

// TestHandlerPanicAnswers500: a panicking handler (installed by this test
// only: no production route panics on purpose) answers 500 internal for
// its request, is counted, and the server keeps serving.
func TestHandlerPanicAnswers500(t *testing.T) {
	u := newUITest(t, false)
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	mux.HandleFunc("/v1/health", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"ok"}`)) })
	u.srv.mux = mux
	before := guard.Get("http")
	resp, m := u.req("GET", "/v1/boom", nil, map[string]string{"Bearer": testOperator})
	e, _ := m["error"].(map[string]any)
	if resp.StatusCode != 500 || e["code"] != "internal" || !strings.Contains(e["message"].(string), "boom") {
		t.Fatalf("got %d %v", resp.StatusCode, m)
	}
	if got := guard.Get("http"); got != before+1 {
		t.Fatalf("panic counter %d, want %d", got, before+1)
	}
	if resp, _ := u.req("GET", "/v1/health", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("after the panic: %d", resp.StatusCode)
	}
}
