// Package httpapi is conch's gateway adapter: the JSON HTTP API under /v1,
// server-sent events, MCP over streamable HTTP at /mcp and /metrics, on top
// of an engine. It authenticates callers (agent and operator bearer
// tokens; the engine socket grants operator rights by file permission),
// guards against DNS rebinding and cross-site requests, and translates
// requests to engine calls. It holds no session state of its own.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/adapter/mcpserver"
	"github.com/conchsh/conch/internal/adapter/ui"
	"github.com/conchsh/conch/internal/base/guard"
	nodehub "github.com/conchsh/conch/internal/node/hub"
	"github.com/conchsh/conch/internal/store/auth"
)

// MaxBodyBytes caps request bodies.
const MaxBodyBytes = 4 << 20

// MaxPatchBodyBytes caps the body of POST /v1/apply_patch: a patch may be
// 8 MiB, and JSON string escaping can more than
// double it.
const MaxPatchBodyBytes = 24 << 20

// Options configure a Server.
type Options struct {
	Engine *engine.Engine
	Home   string
	Agents *auth.Store
	// OperatorToken is the operator's bearer token.
	OperatorToken string
	// MetricsToken, if set, is a bearer token that reads GET /metrics and
	// nothing else (conch serve --metrics-token-file).
	MetricsToken string
	// Listen is the address the server listens on; its host is accepted
	// in Host headers.
	Listen string
	// AllowedHosts and AllowedOrigins extend the Host and Origin checks.
	AllowedHosts, AllowedOrigins []string
	Version                      string
	Logger                       *slog.Logger
	// UI serves the control UI at / and its sign-in routes under /v1/ui.
	// Off by default; the engine socket never serves
	// pages.
	UI bool
	// PublicURL is the base of the login links (e.g.
	// "http://127.0.0.1:7878"); default "http://" + Listen.
	PublicURL string
	// Nodes, if set, is the node hub: /v1/nodes/connect for nodes and the
	// operator routes under /v1/nodes.
	Nodes *nodehub.Hub
}

// Server serves the gateway. Create it with New; it is safe for
// concurrent use.
type Server struct {
	opt     Options
	eng     *engine.Engine
	log     *slog.Logger
	hub     *Hub
	started time.Time
	mux     *http.ServeMux
	mcp     http.Handler
	// mcpAuthed is mcp behind the SDK's bearer check, which binds each MCP
	// session to the agent that created it (no session takeover).
	mcpAuthed http.Handler

	ui      *uiAuth      // login codes and UI sessions
	uiFiles http.Handler // the embedded control UI

	metricsH http.Handler // /metrics: a private Prometheus registry

	mu   sync.Mutex // guards mcps
	mcps map[string]*mcpserver.Server

	proxies proxyCalls // calls of proxying conch mcp processes (engine socket)

	approvals approvalsStore // the approvals store, opened once

	drain drainState // shutdown: new requests answered 503, in-flight ones counted
}

// drainState counts the requests in flight and, once draining, refuses
// new ones.
type drainState struct {
	mu       sync.Mutex // guards the fields below
	draining bool
	inflight int
	idle     chan struct{} // closed when inflight reaches 0 while draining
}

// enter admits a request unless the server is draining; a counted one
// must call leave when it returns.
func (d *drainState) enter(counted bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return false
	}
	if counted {
		d.inflight++
	}
	return true
}

func (d *drainState) leave() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inflight--
	if d.draining && d.inflight == 0 && d.idle != nil {
		close(d.idle)
		d.idle = nil
	}
}

// BeginDrain makes the server answer every request that arrives from now
// on, on any listener, with 503 unavailable "conch engine is shutting
// down." (and Connection: close), while the listeners stay open: a client
// that connects while the gateway shuts down gets that answer, not a
// refused connection. Call it when shutdown starts; it does not wait.
func (s *Server) BeginDrain() {
	s.drain.mu.Lock()
	s.drain.draining = true
	s.drain.mu.Unlock()
}

// Drain is BeginDrain that then waits until the requests in flight have
// returned (their answers written), or ctx is done.
func (s *Server) Drain(ctx context.Context) error {
	s.drain.mu.Lock()
	s.drain.draining = true
	if s.drain.inflight == 0 {
		s.drain.mu.Unlock()
		return nil
	}
	if s.drain.idle == nil {
		s.drain.idle = make(chan struct{})
	}
	idle := s.drain.idle
	s.drain.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drain requests: %w", context.Cause(ctx))
	}
}

// New returns a server for opt.Engine.
func New(opt Options) *Server {
	s := &Server{opt: opt, eng: opt.Engine, log: opt.Logger, hub: NewHub(1000), started: time.Now(), mcps: map[string]*mcpserver.Server{}, ui: newUIAuth(), uiFiles: ui.Handler()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mcp = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		id := identityOf(r.Context())
		return s.mcpServer(id.agent).Server
	}, &mcp.StreamableHTTPOptions{Logger: s.log, DisableLocalhostProtection: true, SessionTimeout: 30 * time.Minute})
	s.mcpAuthed = sdkauth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		agent, ok := s.opt.Agents.Lookup(token)
		if !ok {
			return nil, sdkauth.ErrInvalidToken
		}
		return &sdkauth.TokenInfo{UserID: agent, Expiration: time.Now().Add(24 * time.Hour)}, nil
	}, nil)(s.mcp)
	s.metricsH = s.newMetricsHandler()
	s.routes()
	return s
}

// Publish fans an engine event out to SSE subscribers (and nothing else):
// pass it as engine.Options.Events.
func (s *Server) Publish(ev engine.Event) { s.hub.Publish(ev) }

// Notify pushes an exec notice to the agent's live MCP sessions: pass it
// as engine.Options.Notify.
func (s *Server) Notify(agent string, n apitype.Notice) {
	s.mu.Lock()
	m := s.mcps[agent]
	s.mu.Unlock()
	if m != nil {
		m.Notify(agent, n)
	}
}

func (s *Server) mcpServer(agent string) *mcpserver.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mcps[agent]
	if m == nil {
		m = mcpserver.New(s.eng, mcpserver.Options{Agent: agent, Version: s.opt.Version, Logger: s.log})
		s.mcps[agent] = m
	}
	return m
}

// identity is who a request acts as.
type identity struct {
	agent    string // the agent calls act for
	operator bool   // operator rights
	metrics  bool   // the metrics token: GET /metrics only
	cookie   bool   // authenticated by the control-UI cookie
}

type ctxKey struct{}

func identityOf(ctx context.Context) identity {
	id, _ := ctx.Value(ctxKey{}).(identity)
	return id
}

// Handler is the TCP handler: bearer tokens, Host and Origin checks.
func (s *Server) Handler() http.Handler { return s.wrap(false) }

// SocketHandler is the engine-socket handler: operator rights by file
// permission, no token; X-Conch-Agent selects the agent.
func (s *Server) SocketHandler() http.Handler { return s.wrap(true) }

func (s *Server) wrap(socket bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer s.recoverPanic(w)
		rid := newRequestID()
		w.Header().Set("X-Request-Id", rid)
		// A node's WebSocket lives as long as its link (the hub ends it
		// at shutdown): it is refused while draining, but not waited for.
		counted := r.URL.Path != "/v1/nodes/connect"
		if !s.drain.enter(counted) {
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusServiceUnavailable, apitype.CodeUnavailable, "conch engine is shutting down.")
			return
		}
		if counted {
			defer s.drain.leave()
		}
		if r.URL.Path == "/v1/nodes/connect" && !socket {
			// Nodes authenticate with their own tokens and may dial any
			// name of the gateway.
			if s.opt.Nodes == nil {
				writeError(w, http.StatusServiceUnavailable, "unavailable", "node hosts are served by conch serve")
				return
			}
			s.nodeConnect(w, r)
			return
		}
		if !socket && !s.checkHostOrigin(w, r) {
			return
		}
		limit := int64(MaxBodyBytes)
		if r.URL.Path == "/v1/apply_patch" {
			limit = MaxPatchBodyBytes
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if s.servePublic(w, r, socket) {
			return
		}
		id, ok := s.authenticate(w, r, socket)
		if !ok {
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v1/proxies/") && !socket {
			writeError(w, http.StatusNotFound, "not_found", "proxies are served on the engine socket only")
			return
		}
		ctx, done := s.requestContext(r, id, socket)
		defer done()
		r = r.WithContext(ctx)
		if r.URL.Path == "/mcp" || strings.HasPrefix(r.URL.Path, "/mcp/") {
			s.serveMCP(w, r, id, socket)
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// recoverPanic, deferred by every request: a panic in any handler (/v1,
// /mcp's HTTP side, the UI, event streams) answers 500 internal for this
// request only; net/http would otherwise drop the connection with an
// empty reply.
func (s *Server) recoverPanic(w http.ResponseWriter) {
	if v := recover(); v != nil {
		if v == http.ErrAbortHandler {
			panic(v)
		}
		p := guard.Recovered("http", s.log, v)
		writeError(w, http.StatusInternalServerError, apitype.CodeInternal, p.Error()+" (logged; the server keeps running)")
	}
}

// checkHostOrigin refuses a request over TCP whose Host or Origin is not
// allowed.
func (s *Server) checkHostOrigin(w http.ResponseWriter, r *http.Request) bool {
	if !s.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, "forbidden", "Host header not allowed")
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o, r.Host, r.TLS != nil) {
		writeError(w, http.StatusForbidden, "forbidden", "Origin not allowed")
		return false
	}
	return true
}

// servePublic serves what needs no credentials: the health check, and
// with the UI on over TCP its sign-in exchange, session probe, pages and
// assets. It reports whether it answered.
func (s *Server) servePublic(w http.ResponseWriter, r *http.Request, socket bool) bool {
	if r.URL.Path == "/v1/health" {
		s.mux.ServeHTTP(w, r)
		return true
	}
	if !socket && s.opt.UI {
		// The sign-in exchange and the session probe authenticate
		// themselves; pages and assets are public (they hold no data).
		if r.URL.Path == "/v1/ui/session" && (r.Method == http.MethodPost || r.Method == http.MethodGet) {
			s.mux.ServeHTTP(w, r)
			return true
		}
		if isUIPath(r.URL.Path) && safeMethod(r.Method) {
			s.uiFiles.ServeHTTP(w, r)
			return true
		}
	}
	return false
}

// authenticate finds who is calling: the engine socket is the operator;
// over TCP, a UI session cookie (the operator, with its CSRF check) or a
// bearer token (the operator's, the metrics scraper's or an agent's).
// An operator acts for the agent of X-Conch-Agent. A refusal is
// answered here (ok false).
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, socket bool) (id identity, ok bool) {
	authz := r.Header.Get("Authorization")
	cookie, _ := r.Cookie(UICookie)
	switch {
	case socket:
		id = identity{operator: true, agent: "main"}
	case authz == "" && cookie != nil && s.opt.UI:
		csrf, _, ok := s.ui.session(cookie.Value)
		if !ok {
			writeError(w, http.StatusUnauthorized, "unauthenticated", "UI session expired; sign in again")
			return id, false
		}
		if msg := checkCookieRequest(r, csrf); msg != "" {
			writeError(w, http.StatusForbidden, "forbidden", msg)
			return id, false
		}
		id = identity{operator: true, agent: "main", cookie: true}
	default:
		if id, ok = s.bearer(w, r, authz); !ok {
			return id, false
		}
	}
	if id.operator {
		if a := r.Header.Get("X-Conch-Agent"); a != "" {
			id.agent = a
		}
	}
	return id, true
}

// bearer authenticates the bearer token of authz.
func (s *Server) bearer(w http.ResponseWriter, r *http.Request, authz string) (identity, bool) {
	tok, ok := strings.CutPrefix(authz, "Bearer ")
	switch {
	case !ok || tok == "":
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeError(w, http.StatusUnauthorized, "unauthenticated", "missing bearer token")
		return identity{}, false
	case s.opt.OperatorToken != "" && auth.Equal(tok, s.opt.OperatorToken):
		return identity{operator: true, agent: "main"}, true
	case s.opt.MetricsToken != "" && auth.Equal(tok, s.opt.MetricsToken):
		if r.URL.Path != "/metrics" {
			writeError(w, http.StatusForbidden, "forbidden", "the metrics token reads /metrics only")
			return identity{}, false
		}
		return identity{metrics: true}, true
	}
	agent, ok := s.opt.Agents.Lookup(tok)
	if !ok {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeError(w, http.StatusUnauthorized, "unauthenticated", "invalid bearer token")
		return identity{}, false
	}
	return identity{agent: agent}, true
}

// requestContext is the context of an authenticated request: its
// identity, the engine's operator and workdir marks, a proxied call's
// registration, and for a GET an end when the engine stops. done
// releases what it holds.
func (s *Server) requestContext(r *http.Request, id identity, socket bool) (ctx context.Context, done func()) {
	var undo []func()
	done = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	ctx = context.WithValue(r.Context(), ctxKey{}, id)
	// A proxied conch mcp speaks for the agent itself (its model reads
	// the results): honoured on the engine socket only.
	if id.operator && !(socket && r.Header.Get("X-Conch-Proxy") == "mcp") {
		ctx = engine.AsOperator(ctx)
	}
	if wd := r.Header.Get("X-Conch-Workdir"); socket && wd != "" {
		// Honoured on the engine socket only: a proxied conch mcp.
		ctx = engine.WithWorkdir(ctx, wd)
	}
	if pid := r.Header.Get("X-Conch-Proxy-Id"); socket && validProxyID(pid) && r.Method == http.MethodPost {
		// A proxied conch mcp's call: answered at once when that
		// proxy stops (POST /v1/proxies/{id}/stop).
		var leave func()
		ctx, leave = s.proxies.enter(ctx, pid)
		undo = append(undo, leave)
	}
	if r.Method == http.MethodGet && s.eng != nil {
		// GETs are where the streams are (events, a session's
		// output, MCP's server-to-client stream): they end when the
		// engine stops, so a shutdown does not wait for them.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		undo = append(undo, cancel)
		go func() {
			select {
			case <-s.eng.Stopping():
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, done
}

// serveMCP serves /mcp: agents only over TCP; on the engine socket, the
// proxied conch mcp.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, id identity, socket bool) {
	if id.operator && !socket {
		writeError(w, http.StatusForbidden, "forbidden", "operator credentials cannot use /mcp; use an agent token")
		return
	}
	if socket {
		s.mcp.ServeHTTP(w, r)
	} else {
		s.mcpAuthed.ServeHTTP(w, r)
	}
}

func (s *Server) hostAllowed(host string) bool {
	if loopbackHost(host, s.opt.Listen) {
		return true
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	for _, a := range s.opt.AllowedHosts {
		if strings.EqualFold(a, h) || strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// loopbackHost reports whether a Host header names a loopback name or the
// specific (not wildcard) host of the listen address.
func loopbackHost(host, listen string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	switch h {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	if lh, _, err := net.SplitHostPort(listen); err == nil && h == strings.Trim(lh, "[]") && lh != "" && lh != "0.0.0.0" && lh != "::" {
		return true
	}
	return false
}

func (s *Server) originAllowed(origin, host string, tls bool) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	if u.Scheme == scheme && strings.EqualFold(u.Host, host) {
		return true
	}
	for _, a := range s.opt.AllowedOrigins {
		if strings.EqualFold(strings.TrimRight(a, "/"), strings.TrimRight(origin, "/")) {
			return true
		}
	}
	return false
}

// isUIPath reports whether a path belongs to the control UI's pages and
// assets rather than to the API.
func isUIPath(p string) bool {
	return !(p == "/metrics" || p == "/mcp" || strings.HasPrefix(p, "/mcp/") || p == "/v1" || strings.HasPrefix(p, "/v1/"))
}

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func statusOf(code string) int { return apitype.HTTPStatus(code) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// writeResult writes a tool result: 200 for outcomes, the code's status
// for results that carry an error object.
func writeResult(w http.ResponseWriter, res apitype.Result) {
	if d, ok := res.Details.(*apitype.ErrorDetails); ok && d.Error != nil {
		writeJSON(w, statusOf(d.Error.Code), map[string]any{"error": d.Error, "text": res.Text, "details": res.Details})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// errorCode extracts the code of an error result, or "".
func errorCode(res apitype.Result) string {
	if d, ok := res.Details.(*apitype.ErrorDetails); ok && d.Error != nil {
		return d.Error.Code
	}
	return ""
}

var errNotOperator = errors.New("operator only")
