package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/store/auth"
)

const testOperator = "cop_test-operator-token"

type uiTest struct {
	t     *testing.T
	srv   *Server
	ts    *httptest.Server
	agent string // agent main's token
	now   time.Time
}

func newUITest(t *testing.T, ui bool) *uiTest {
	t.Helper()
	home := t.TempDir()
	agents := auth.Open(home)
	tok, err := agents.Add("main", "")
	if err != nil {
		t.Fatal(err)
	}
	u := &uiTest{t: t, agent: tok, now: time.Now()}
	u.srv = New(Options{Home: home, Agents: agents, OperatorToken: testOperator, Listen: "127.0.0.1:0", UI: ui})
	u.srv.ui.now = func() time.Time { return u.now }
	u.ts = httptest.NewServer(u.srv.Handler())
	t.Cleanup(u.ts.Close)
	return u
}

// req sends a request; hdr "Bearer" sets Authorization, "Cookie" the UI
// cookie value.
func (u *uiTest) req(method, path string, body any, hdr map[string]string) (*http.Response, map[string]any) {
	u.t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	r, _ := http.NewRequest(method, u.ts.URL+path, rd)
	for k, v := range hdr {
		switch k {
		case "Bearer":
			r.Header.Set("Authorization", "Bearer "+v)
		case "Cookie":
			r.AddCookie(&http.Cookie{Name: UICookie, Value: v})
		default:
			r.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

// code mints a login code with the operator token.
func (u *uiTest) code() string {
	u.t.Helper()
	resp, m := u.req("POST", "/v1/ui/login-code", nil, map[string]string{"Bearer": testOperator})
	if resp.StatusCode != 200 {
		u.t.Fatalf("login-code: %d %v", resp.StatusCode, m)
	}
	link, _ := m["url"].(string)
	pu, err := url.Parse(link)
	if err != nil || pu.Path != "/login" || !strings.HasPrefix(pu.Fragment, "code=") {
		u.t.Fatalf("login link %q", link)
	}
	if exp, _ := m["expiresAtMs"].(float64); int64(exp) != u.now.Add(LoginCodeTTL).UnixMilli() {
		u.t.Fatalf("expiresAtMs %v", m["expiresAtMs"])
	}
	return strings.TrimPrefix(pu.Fragment, "code=")
}

// signIn exchanges body for a cookie and returns it with the CSRF token.
func (u *uiTest) signIn(body any) (cookie, csrf string) {
	u.t.Helper()
	resp, m := u.req("POST", "/v1/ui/session", body, nil)
	if resp.StatusCode != 200 {
		u.t.Fatalf("sign in %v: %d %v", body, resp.StatusCode, m)
	}
	for _, c := range resp.Cookies() {
		if c.Name == UICookie {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure || c.MaxAge != int(UISessionTTL/time.Second) {
				u.t.Fatalf("cookie attributes: %+v", c)
			}
			cookie = c.Value
		}
	}
	csrf, _ = m["csrf"].(string)
	if cookie == "" || csrf == "" {
		u.t.Fatalf("no cookie or csrf: %v %v", resp.Header, m)
	}
	return cookie, csrf
}

func TestUILoginCodeIsSingleUseAndExpires(t *testing.T) {
	u := newUITest(t, true)
	code := u.code()
	u.signIn(map[string]any{"code": code})
	if resp, m := u.req("POST", "/v1/ui/session", map[string]any{"code": code}, nil); resp.StatusCode != 401 {
		t.Fatalf("reused code: %d %v", resp.StatusCode, m)
	}
	old := u.code()
	u.now = u.now.Add(LoginCodeTTL + time.Second)
	if resp, m := u.req("POST", "/v1/ui/session", map[string]any{"code": old}, nil); resp.StatusCode != 401 {
		t.Fatalf("expired code: %d %v", resp.StatusCode, m)
	}
	if resp, _ := u.req("POST", "/v1/ui/session", map[string]any{"code": "clc_made-up"}, nil); resp.StatusCode != 401 {
		t.Fatalf("unknown code: %d", resp.StatusCode)
	}
	if resp, _ := u.req("POST", "/v1/ui/session", map[string]any{}, nil); resp.StatusCode != 400 {
		t.Fatalf("empty body: %d", resp.StatusCode)
	}
	// Agents cannot mint codes.
	if resp, _ := u.req("POST", "/v1/ui/login-code", nil, map[string]string{"Bearer": u.agent}); resp.StatusCode != 403 {
		t.Fatalf("agent minted a login code: %d", resp.StatusCode)
	}
}

func TestUITokenSignInRefusesAgentTokens(t *testing.T) {
	u := newUITest(t, true)
	if resp, m := u.req("POST", "/v1/ui/session", map[string]any{"token": u.agent}, nil); resp.StatusCode != 403 || len(resp.Cookies()) != 0 {
		t.Fatalf("agent token: %d %v %v", resp.StatusCode, m, resp.Cookies())
	}
	if resp, _ := u.req("POST", "/v1/ui/session", map[string]any{"token": "cop_wrong"}, nil); resp.StatusCode != 401 {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	cookie, _ := u.signIn(map[string]any{"token": testOperator})
	if resp, m := u.req("GET", "/v1/approvals", nil, map[string]string{"Cookie": cookie}); resp.StatusCode != 200 {
		t.Fatalf("cookie has no operator rights: %d %v", resp.StatusCode, m)
	}
	// The cookie is an operator credential, and operators cannot use /mcp.
	if resp, _ := u.req("POST", "/mcp", map[string]any{}, map[string]string{"Cookie": cookie, "X-Conch-CSRF": "x", "Origin": u.ts.URL}); resp.StatusCode != 403 {
		t.Fatalf("cookie on /mcp: %d", resp.StatusCode)
	}
}

func TestUICookieNeedsCSRFAndSameOrigin(t *testing.T) {
	u := newUITest(t, true)
	cookie, csrf := u.signIn(map[string]any{"code": u.code()})
	put := map[string]any{"file": map[string]any{"version": 1}, "baseHash": ""}
	cases := []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"missing CSRF", map[string]string{"Cookie": cookie, "Origin": u.ts.URL}, 403},
		{"wrong CSRF", map[string]string{"Cookie": cookie, "Origin": u.ts.URL, "X-Conch-CSRF": csrf + "x"}, 403},
		{"no Origin", map[string]string{"Cookie": cookie, "X-Conch-CSRF": csrf}, 403},
		{"cross-origin", map[string]string{"Cookie": cookie, "X-Conch-CSRF": csrf, "Origin": "http://evil.example"}, 403},
		{"cross-site fetch metadata", map[string]string{"Cookie": cookie, "X-Conch-CSRF": csrf, "Sec-Fetch-Site": "cross-site"}, 403},
		{"unknown cookie", map[string]string{"Cookie": "cus_nope", "X-Conch-CSRF": csrf, "Origin": u.ts.URL}, 401},
		{"same-origin with CSRF", map[string]string{"Cookie": cookie, "X-Conch-CSRF": csrf, "Origin": u.ts.URL}, 200},
	}
	for _, c := range cases {
		resp, m := u.req("PUT", "/v1/approvals-file", put, c.hdr)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %v, want %d", c.name, resp.StatusCode, m, c.want)
		}
	}
	// Reads need no CSRF token; GET /v1/ui/session hands it back.
	resp, m := u.req("GET", "/v1/ui/session", nil, map[string]string{"Cookie": cookie})
	if resp.StatusCode != 200 || m["csrf"] != csrf {
		t.Fatalf("GET session: %d %v", resp.StatusCode, m)
	}
	// Sign-out needs the token too, then the cookie is dead.
	if resp, _ := u.req("DELETE", "/v1/ui/session", nil, map[string]string{"Cookie": cookie, "Origin": u.ts.URL}); resp.StatusCode != 403 {
		t.Fatalf("logout without CSRF: %d", resp.StatusCode)
	}
	if resp, _ := u.req("DELETE", "/v1/ui/session", nil, map[string]string{"Cookie": cookie, "Origin": u.ts.URL, "X-Conch-CSRF": csrf}); resp.StatusCode != 200 {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp, _ := u.req("GET", "/v1/approvals", nil, map[string]string{"Cookie": cookie}); resp.StatusCode != 401 {
		t.Fatalf("cookie after logout: %d", resp.StatusCode)
	}
}

func TestUISessionSlidesAndExpires(t *testing.T) {
	u := newUITest(t, true)
	cookie, _ := u.signIn(map[string]any{"code": u.code()})
	for range 3 {
		u.now = u.now.Add(UISessionTTL - time.Hour)
		if resp, _ := u.req("GET", "/v1/approvals", nil, map[string]string{"Cookie": cookie}); resp.StatusCode != 200 {
			t.Fatalf("active session expired: %d", resp.StatusCode)
		}
	}
	u.now = u.now.Add(UISessionTTL + time.Second)
	if resp, _ := u.req("GET", "/v1/approvals", nil, map[string]string{"Cookie": cookie}); resp.StatusCode != 401 {
		t.Fatalf("idle session still valid: %d", resp.StatusCode)
	}
}

func TestUIDisabled(t *testing.T) {
	u := newUITest(t, false)
	if resp, _ := u.req("POST", "/v1/ui/session", map[string]any{"token": testOperator}, nil); resp.StatusCode != 401 {
		t.Fatalf("sign-in without bearer on a --no-ui gateway: %d", resp.StatusCode)
	}
	if resp, _ := u.req("POST", "/v1/ui/login-code", nil, map[string]string{"Bearer": testOperator}); resp.StatusCode != 404 {
		t.Fatalf("login-code on a --no-ui gateway: %d", resp.StatusCode)
	}
	if resp, _ := u.req("GET", "/approvals", nil, nil); resp.StatusCode != 401 {
		t.Fatalf("page on a --no-ui gateway: %d", resp.StatusCode)
	}
}

func TestUIPagesAreServedWithCSP(t *testing.T) {
	u := newUITest(t, true)
	for _, p := range []string{"/", "/login", "/approvals", "/sessions/abc", "/policy", "/assets/app.js", "/assets/vendor/xterm/xterm.js"} {
		resp, _ := u.req("GET", p, nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: %d %q", p, resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
		}
	}
	if resp, _ := u.req("GET", "/nope", nil, nil); resp.StatusCode != 404 {
		t.Errorf("unknown page: %d", resp.StatusCode)
	}
	// DNS rebinding protection covers the pages too.
	r, _ := http.NewRequest("GET", u.ts.URL+"/approvals", nil)
	r.Host = "evil.example"
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("rebinding Host: %d", resp.StatusCode)
	}
}

func TestUICookieSecureUnderTLS(t *testing.T) {
	home := t.TempDir()
	srv := New(Options{Home: home, Agents: auth.Open(home), OperatorToken: testOperator, Listen: "127.0.0.1:0", UI: true})
	ts := httptest.NewTLSServer(srv.Handler())
	defer ts.Close()
	resp, err := ts.Client().Post(ts.URL+"/v1/ui/session", "application/json", strings.NewReader(`{"token":"`+testOperator+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cs := resp.Cookies()
	if resp.StatusCode != 200 || len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("TLS sign-in: %d %+v", resp.StatusCode, cs)
	}
}
