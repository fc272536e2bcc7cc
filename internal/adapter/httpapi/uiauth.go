package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/conchsh/conch/internal/store/auth"
)

// Control-UI sign-in. A one-time login code (from
// `conch ui` or POST /v1/ui/login-code) or the operator token is
// exchanged through POST /v1/ui/session for a session cookie. The cookie
// carries operator rights; every state-changing request made with it must
// also carry the session's CSRF token in X-Conch-CSRF and come from the
// server's own origin. Codes and sessions live in memory only: a restart
// of conch serve signs every browser out.

const (
	// UICookie is the name of the control-UI session cookie.
	UICookie = "conch_ui"
	// LoginCodeTTL is how long a login code stays valid.
	LoginCodeTTL = 5 * time.Minute
	// UISessionTTL is the idle lifetime of a UI session; every
	// authenticated request extends it.
	UISessionTTL = 12 * time.Hour
	// maxLoginCodes bounds the outstanding codes; the oldest is dropped.
	maxLoginCodes = 64
	// maxUISessions bounds the live sessions; the oldest is dropped.
	maxUISessions = 256
)

// uiSession is one signed-in browser.
type uiSession struct {
	csrf    string
	expires time.Time
}

// uiAuth holds login codes and UI sessions, keyed by the sha256 of the
// secret so that a timing side channel on map lookups reveals nothing
// usable. It is safe for concurrent use.
type uiAuth struct {
	now func() time.Time

	mu       sync.Mutex            // guards codes and sessions
	codes    map[string]time.Time  // sha256(code) -> expiry
	sessions map[string]*uiSession // sha256(cookie) -> session
}

func newUIAuth() *uiAuth {
	return &uiAuth{now: time.Now, codes: map[string]time.Time{}, sessions: map[string]*uiSession{}}
}

func secretKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// mintCode returns a new one-time login code and its expiry.
func (a *uiAuth) mintCode() (string, time.Time) {
	code := auth.NewToken("clc_")
	exp := a.now().Add(LoginCodeTTL)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gcLocked()
	if len(a.codes) >= maxLoginCodes {
		var oldest string
		for k, e := range a.codes {
			if oldest == "" || e.Before(a.codes[oldest]) {
				oldest = k
			}
		}
		delete(a.codes, oldest)
	}
	a.codes[secretKey(code)] = exp
	return code, exp
}

// redeemCode consumes a login code: true once, for an unexpired code.
func (a *uiAuth) redeemCode(code string) bool {
	if code == "" {
		return false
	}
	k := secretKey(code)
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.codes[k]
	delete(a.codes, k) // single use, also when expired
	return ok && a.now().Before(exp)
}

// newSession creates a UI session and returns its cookie value and CSRF
// token.
func (a *uiAuth) newSession() (cookie, csrf string, exp time.Time) {
	cookie, csrf = auth.NewToken("cus_"), auth.NewToken("")
	exp = a.now().Add(UISessionTTL)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gcLocked()
	if len(a.sessions) >= maxUISessions {
		var oldest string
		for k, s := range a.sessions {
			if oldest == "" || s.expires.Before(a.sessions[oldest].expires) {
				oldest = k
			}
		}
		delete(a.sessions, oldest)
	}
	a.sessions[secretKey(cookie)] = &uiSession{csrf: csrf, expires: exp}
	return cookie, csrf, exp
}

// session looks a cookie up and slides its expiry; ok is false for an
// unknown or expired cookie.
func (a *uiAuth) session(cookie string) (csrf string, exp time.Time, ok bool) {
	if cookie == "" {
		return "", time.Time{}, false
	}
	k := secretKey(cookie)
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[k]
	if s == nil {
		return "", time.Time{}, false
	}
	now := a.now()
	if !now.Before(s.expires) {
		delete(a.sessions, k)
		return "", time.Time{}, false
	}
	s.expires = now.Add(UISessionTTL)
	return s.csrf, s.expires, true
}

// endSession signs a cookie out.
func (a *uiAuth) endSession(cookie string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, secretKey(cookie))
}

func (a *uiAuth) gcLocked() {
	now := a.now()
	for k, e := range a.codes {
		if !now.Before(e) {
			delete(a.codes, k)
		}
	}
	for k, s := range a.sessions {
		if !now.Before(s.expires) {
			delete(a.sessions, k)
		}
	}
}

// safeMethod reports whether a method does not change state.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// checkCookieRequest applies the CSRF rules to a request authenticated by
// the UI cookie: a state-changing request must carry the session's token
// in X-Conch-CSRF and be same-origin (an Origin header, which the wrapper
// has already matched against the server's origin, or Sec-Fetch-Site:
// same-origin). It returns the refusal message, or "".
func checkCookieRequest(r *http.Request, csrf string) string {
	if safeMethod(r.Method) {
		return ""
	}
	got := r.Header.Get("X-Conch-CSRF")
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(csrf)) != 1 {
		return "missing or wrong X-Conch-CSRF header"
	}
	if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") != "same-origin" {
		return "cross-origin request refused (no Origin header)"
	}
	return ""
}

func (s *Server) setUICookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: UICookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// loginURL is the link `conch ui` prints for code.
func (s *Server) loginURL(code string) string {
	base := strings.TrimRight(s.opt.PublicURL, "/")
	if base == "" {
		base = "http://" + s.opt.Listen
	}
	return base + "/login#code=" + code
}

// uiLoginCode is POST /v1/ui/login-code (operator).
func (s *Server) uiLoginCode(w http.ResponseWriter, r *http.Request) {
	code, exp := s.ui.mintCode()
	writeJSON(w, 200, map[string]any{"url": s.loginURL(code), "expiresAtMs": exp.UnixMilli()})
}

// uiSessionCreate is POST /v1/ui/session: {code} or {token} (operator
// token only) ⇒ the session cookie, and the CSRF token in the body.
func (s *Server) uiSessionCreate(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		Code  string `json:"code"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, 400, "invalid_argument", "body must be {code} or {token}")
		return
	}
	in.Code, in.Token = strings.TrimSpace(in.Code), strings.TrimSpace(in.Token)
	switch {
	case in.Code != "" && in.Token != "":
		writeError(w, 400, "invalid_argument", "give either code or token, not both")
		return
	case in.Code != "":
		if !s.ui.redeemCode(in.Code) {
			writeError(w, 401, "unauthenticated", "login code invalid, expired or already used; run conch ui for a new link")
			return
		}
	case in.Token != "":
		if s.opt.OperatorToken == "" || !auth.Equal(in.Token, s.opt.OperatorToken) {
			if _, isAgent := s.opt.Agents.Lookup(in.Token); isAgent {
				writeError(w, 403, "forbidden", "agent tokens cannot open the control UI; use the operator token or conch ui")
				return
			}
			writeError(w, 401, "unauthenticated", "invalid operator token")
			return
		}
	default:
		writeError(w, 400, "invalid_argument", "body must be {code} or {token}")
		return
	}
	cookie, csrf, exp := s.ui.newSession()
	s.setUICookie(w, r, cookie, int(UISessionTTL/time.Second))
	writeJSON(w, 200, map[string]any{"csrf": csrf, "expiresAtMs": exp.UnixMilli()})
}

// uiSessionGet is GET /v1/ui/session: the CSRF token of the cookie's
// session (the page keeps it in memory only), and a refreshed cookie.
func (s *Server) uiSessionGet(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(UICookie)
	if err != nil {
		writeError(w, 401, "unauthenticated", "not signed in")
		return
	}
	csrf, exp, ok := s.ui.session(c.Value)
	if !ok {
		s.setUICookie(w, r, "", -1)
		writeError(w, 401, "unauthenticated", "UI session expired; sign in again")
		return
	}
	s.setUICookie(w, r, c.Value, int(UISessionTTL/time.Second))
	writeJSON(w, 200, map[string]any{"csrf": csrf, "expiresAtMs": exp.UnixMilli()})
}

// uiSessionDelete is DELETE /v1/ui/session: sign out.
func (s *Server) uiSessionDelete(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(UICookie); err == nil {
		s.ui.endSession(c.Value)
	}
	s.setUICookie(w, r, "", -1)
	writeJSON(w, 200, map[string]any{"ok": true})
}
