package ui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHandlerServesPagesAndAssets(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/", "/login", "/approvals", "/sessions", "/sessions/quiet-otter", "/nodes", "/policy"} {
		resp, body := get(t, h, p)
		if resp.StatusCode != 200 || !strings.Contains(body, `<script src="/assets/app.js"`) {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
		if resp.Header.Get("Content-Security-Policy") != ContentSecurityPolicy || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", p, resp.Header)
		}
	}
	for _, p := range []string{"/assets/app.js", "/assets/app.css", "/assets/vendor/xterm/xterm.js", "/assets/vendor/xterm/xterm.css", "/assets/vendor/xterm/addon-fit.js", "/assets/vendor/xterm/LICENSE"} {
		if resp, body := get(t, h, p); resp.StatusCode != 200 || len(body) == 0 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	for _, p := range []string{"/nope", "/sessions/a/b", "/assets/", "/assets/missing.js"} {
		if resp, _ := get(t, h, p); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}

// The UI must work offline: its own files reference nothing outside the
// gateway.
func TestNoExternalReferences(t *testing.T) {
	ext := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import|fetch\(\s*["'\x60]https?:|new EventSource\(\s*["'\x60]https?:`)
	for _, name := range []string{"static/index.html", "static/app.js", "static/app.css", "static/vendor/xterm/xterm.css"} {
		b, err := fs.ReadFile(static, name)
		if err != nil {
			t.Fatal(err)
		}
		if m := ext.Find(b); m != nil {
			t.Errorf("%s references an external resource: %q", name, m)
		}
	}
}
