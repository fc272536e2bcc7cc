package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// rawAuth sends GET path with the Authorization header set to authz as it
// is (none when authz is "-"), and returns the status and error code.
func (u *uiTest) rawAuth(method, path, authz string) (int, string, http.Header) {
	u.t.Helper()
	r, _ := http.NewRequest(method, u.ts.URL+path, nil)
	if authz != "-" {
		r.Header["Authorization"] = []string{authz}
	}
	resp, m := u.do(r)
	code := ""
	if e, ok := m["error"].(map[string]any); ok {
		code, _ = e["code"].(string)
	}
	return resp.StatusCode, code, resp.Header
}

func (u *uiTest) do(r *http.Request) (*http.Response, map[string]any) {
	u.t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

// TestMalformedAuthorization: every Authorization header that is not
// exactly "Bearer " and a known token is 401 unauthenticated with a
// WWW-Authenticate challenge, on an operator route and an agent route
// alike. The members are generated from the two real tokens: no header,
// no scheme, another scheme, the scheme in other letter cases, extra
// spaces or words, a token cut or extended by one character, and the
// token of the other kind's prefix.
func TestMalformedAuthorization(t *testing.T) {
	u := newUITest(t, false)
	var bad []string
	for _, tok := range []string{testOperator, u.agent} {
		bad = append(bad, tok, "bearer "+tok, "BEARER "+tok, "Bearer:"+tok, "Bearer"+tok, "Bearer  "+tok, "Bearer "+tok+" x",
			"Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+tok)), "Token "+tok, "Bearer "+tok[:len(tok)-1], "Bearer "+tok+"x",
			"Bearer "+strings.ToUpper(tok), "Bearer \""+tok+"\"", "Bearer "+tok+","+tok)
	}
	bad = append(bad, "-", "", "Bearer", "Bearer ", "Bearer cat_", "Bearer cop_", "Bearer cat_"+strings.TrimPrefix(testOperator, "cop_"),
		"Bearer cop_"+strings.TrimPrefix(u.agent, "cat_"), "Bearer "+strings.Repeat("a", 1<<16))
	for _, authz := range bad {
		for _, path := range []string{"/v1/agents", "/v1/no-such-route"} {
			status, code, hdr := u.rawAuth("GET", path, authz)
			if status != http.StatusUnauthorized || code != "unauthenticated" || hdr.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("GET %s with Authorization %.40q: %d %q (WWW-Authenticate %q), want 401 unauthenticated", path, authz, status, code, hdr.Get("WWW-Authenticate"))
			}
		}
	}
}

// TestTokenScopes: the operator token reaches the operator routes; an
// agent's token is authenticated but refused there (403), and cannot
// borrow the operator's X-Conch-Agent; a rotation over the API ends the
// old agent token at once and the new one works.
func TestTokenScopes(t *testing.T) {
	u := newUITest(t, false)
	op := map[string]string{"Bearer": testOperator}
	if resp, m := u.req("GET", "/v1/agents", nil, op); resp.StatusCode != 200 {
		t.Fatalf("operator: %d %v", resp.StatusCode, m)
	}
	for _, hdr := range []map[string]string{{"Bearer": u.agent}, {"Bearer": u.agent, "X-Conch-Agent": "main"}} {
		if resp, m := u.req("GET", "/v1/agents", nil, hdr); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("an agent token on an operator route (%v): %d %v, want 403", hdr, resp.StatusCode, m)
		}
	}
	resp, m := u.req("POST", "/v1/agents/main/token", nil, op)
	fresh, _ := m["token"].(string)
	if resp.StatusCode != 200 || !strings.HasPrefix(fresh, "cat_") || fresh == u.agent {
		t.Fatalf("rotate: %d %v", resp.StatusCode, m)
	}
	if status, code, _ := u.rawAuth("GET", "/v1/no-such-route", "Bearer "+u.agent); status != http.StatusUnauthorized || code != "unauthenticated" {
		t.Fatalf("the rotated-out token: %d %q, want 401", status, code)
	}
	if status, _, _ := u.rawAuth("GET", "/v1/no-such-route", "Bearer "+fresh); status == http.StatusUnauthorized {
		t.Fatal("the new token is refused")
	}
	if resp, _ := u.req("POST", "/v1/agents/main/token", nil, map[string]string{"Bearer": fresh}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an agent rotating its own token through the operator route: %d, want 403", resp.StatusCode)
	}
}
