package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/base/unixsock"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/adapter/httpapi"
	"github.com/conchsh/conch/internal/adapter/waitprobe"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/kube"
	nodehub "github.com/conchsh/conch/internal/node/hub"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/store/auth"
	"github.com/conchsh/conch/internal/term/visible"
	"github.com/spf13/cobra"
)

func (a *app) serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--home DIR] [--no-ui]",
		Short: "Run the gateway: MCP at /mcp, HTTP API at /v1, events, control UI at /",
		Long: `Run the gateway on the home: the exec and process tools over streamable HTTP MCP
at /mcp, the HTTP API at /v1, server-sent events, /metrics and the control UI at
/. The first start creates the agent main and prints its token once. It also
serves the home's engine socket (run/engine.sock), through which the CLI and
conch mcp reach it. SIGHUP re-reads config.json; SIGTERM or SIGINT stops it,
and sessions keep running unless --stop-sessions.`,
		Example: `  conch serve
  conch serve --listen 0.0.0.0:7878 --tls-cert cert.pem --tls-key key.pem
  conch serve --metrics-listen 127.0.0.1:9478`,
		Args: args(),
	}
	fs := cmd.Flags()
	o := &serveOpts{}
	o.home = homeFlag(fs)
	o.listen = fs.String("listen", envOr("CONCH_LISTEN", "127.0.0.1:7878"), "listen address (env CONCH_LISTEN)")
	o.tlsCert = fs.String("tls-cert", "", "TLS certificate file")
	o.tlsKey = fs.String("tls-key", "", "TLS key file")
	o.insecure = fs.Bool("insecure-listen", false, "allow a non-loopback listen address without TLS")
	o.stopSessions = fs.Bool("stop-sessions", false, "kill running sessions on shutdown (default: they keep running)")
	o.logLevel = fs.String("log-level", envOr("CONCH_LOG", "info"), "debug, info, warn or error")
	o.logFormat = fs.String("log-format", "text", "text or json")
	o.noUI = fs.Bool("no-ui", false, "do not serve the control UI (also server.ui: false)")
	o.metricsListen = fs.String("metrics-listen", envOr("CONCH_METRICS_LISTEN", ""), "also serve GET /metrics on this loopback address, without the operator token")
	o.metricsTokenFile = fs.String("metrics-token-file", envOr("CONCH_METRICS_TOKEN_FILE", ""), "file holding a bearer token that reads /metrics and nothing else")
	o.followParent = exitWithParentFlag(fs)
	cmd.RunE = a.runs(func(*cobra.Command, []string) int { return runServe(o, a.stdout, a.stderr) })
	return cmd
}

// serveOpts are the flags of conch serve.
type serveOpts struct {
	home, listen, tlsCert, tlsKey, logLevel, logFormat, metricsListen, metricsTokenFile *string
	insecure, stopSessions, noUI, followParent                                          *bool
}

// runServe is `conch serve`: the gateway. It checks the flags, starts the
// node hub, the kubernetes backend and the engine, opens the listeners,
// serves until a stop signal or a listener's failure, then shuts down in
// order (see shutdown).
func runServe(o *serveOpts, stdout, stderr io.Writer) int {
	g := &serving{o: o, stdout: stdout, stderr: stderr}
	if !g.openLog() || !g.checkListen() || !g.readMetricsToken() {
		return ExitUsage
	}
	stopTracing, ok := startTracing("serve", stderr)
	if !ok {
		return ExitUsage
	}
	defer stopTracing()
	// Signals are caught from here on: a stop signal while the engine
	// starts stops it once it has started (it answers the calls that
	// arrived meanwhile), and a SIGHUP then re-reads config.json, instead
	// of their default action ending the process.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *o.followParent {
		if err := exitWithParent(stop); err != nil {
			fmt.Fprintf(stderr, "conch serve: %v\n", err)
			return ExitUnavailable
		}
		g.log.Info("stops when the process that started it ends (--exit-with-parent)", "parent", startPPID)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	g.agents = auth.Open(*o.home)
	if code, ok := g.startHub(); !ok {
		return code
	}
	defer g.hub.Close()
	if code, ok := g.startPods(); !ok {
		return code
	}
	defer g.pods.Close()
	if code, ok := g.startEngine(ctx); !ok {
		return code
	}
	if code, ok := g.prepareServer(); !ok {
		g.closeEngine()
		return code
	}
	g.serve()
	g.printBanner()
	go g.reloadOnHUP(hup)
	code := g.wait(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.shutdown(sctx)
	return code
}

// serving is one run of `conch serve`, filled in step by step by
// runServe.
type serving struct {
	o              *serveOpts
	stdout, stderr io.Writer
	h              slog.Handler
	log            *slog.Logger
	useTLS         bool
	metricsToken   string

	agents *auth.Store
	// srvp is set once the engine is up; engine and hub callbacks may
	// run before (reattached sessions), hence the atomic.
	srvp atomic.Pointer[httpapi.Server]
	hub  *nodehub.Hub
	pods *kube.Manager
	// engp is the engine once it exists, for the callbacks given to it.
	engp atomic.Pointer[engine.Engine]
	eng  *engine.Engine

	ln, mln, sock  net.Listener
	base, sockPath string
	ui             bool
	srv            *httpapi.Server
	hs, ss, ms     *http.Server
	errc           chan error
	metricsNote    string
}

// openLog makes the logger of --log-level and --log-format.
func (g *serving) openLog() bool {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*g.o.logLevel)); err != nil {
		fmt.Fprintf(g.stderr, "conch serve: bad --log-level %q\n", *g.o.logLevel)
		return false
	}
	g.h = slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: lvl})
	if *g.o.logFormat == "json" {
		// encoding/json escapes C0 but writes C1, bidi and other
		// format characters as they are: a JSON writer escapes them too,
		// so a log line read in a terminal shows what an agent sent.
		g.h = slog.NewJSONHandler(&visible.Writer{W: g.stderr, Mode: visible.ModeJSON}, &slog.HandlerOptions{Level: lvl})
	}
	g.log = slog.New(g.h)
	return true
}

// checkListen checks --listen (TLS or loopback, unless
// --insecure-listen) and --metrics-listen (loopback only).
func (g *serving) checkListen() bool {
	listen, stderr := *g.o.listen, g.stderr
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		fmt.Fprintf(stderr, "conch serve: bad --listen %q: %v\n", listen, err)
		return false
	}
	g.useTLS = *g.o.tlsCert != "" || *g.o.tlsKey != ""
	if !isLoopback(host) && !g.useTLS && !*g.o.insecure {
		fmt.Fprintf(stderr, "conch serve: refusing to listen on %s without TLS (use --tls-cert/--tls-key, or --insecure-listen)\n", listen)
		return false
	}
	if ml := *g.o.metricsListen; ml != "" {
		mh, _, err := net.SplitHostPort(ml)
		if err != nil {
			fmt.Fprintf(stderr, "conch serve: bad --metrics-listen %q: %v\n", ml, err)
			return false
		}
		if !isLoopback(mh) {
			fmt.Fprintf(stderr, "conch serve: --metrics-listen must be a loopback address (127.0.0.1:PORT or [::1]:PORT), not %q; to scrape from elsewhere use --metrics-token-file on the main listener\n", ml)
			return false
		}
	}
	return true
}

// readMetricsToken reads --metrics-token-file.
func (g *serving) readMetricsToken() bool {
	if *g.o.metricsTokenFile == "" {
		return true
	}
	var err error
	g.metricsToken, err = readMetricsToken(*g.o.metricsTokenFile)
	if err != nil {
		fmt.Fprintf(g.stderr, "conch serve: --metrics-token-file: %v\n", err)
		return false
	}
	return true
}

// startHub opens the node hub, which restores the mirrors of node
// sessions before the engine reattaches them.
func (g *serving) startHub() (int, bool) {
	var err error
	g.hub, err = nodehub.New(nodehub.Options{Home: *g.o.home, Logger: g.log, Ping: nodePing(), Events: func(typ string, data any) {
		if srv := g.srvp.Load(); srv != nil {
			srv.Publish(engine.Event{Type: typ, Data: data})
		}
	}})
	if err != nil {
		fmt.Fprintf(g.stderr, "conch serve: node hub: %v\n", err)
		return ExitUnavailable, false
	}
	return ExitOK, true
}

// startPods opens the kubernetes sandbox backend, which pairs its pods
// through the hub.
func (g *serving) startPods() (int, bool) {
	var err error
	g.pods, err = kube.New(*g.o.home, g.hub, g.log)
	if err != nil {
		fmt.Fprintf(g.stderr, "conch serve: kubernetes backend: %v\n", err)
		return ExitUnavailable, false
	}
	return ExitOK, true
}

// startEngine starts the engine, then resumes the sandbox pods paired
// before this start.
func (g *serving) startEngine(ctx context.Context) (int, bool) {
	// nodeBinding reads the engine once it exists (apply_patch on a node
	// is only called after that).
	nodeBinding := func(agent string) string {
		if e := g.engp.Load(); e != nil {
			return e.NodeBinding(agent)
		}
		return ""
	}
	eng, err := engine.New(engine.Options{
		Home: *g.o.home, Mode: "serve", Logger: g.log, Nodes: g.hub, Pods: g.pods, Probes: waitprobe.Probes{},
		PatchNode: func(ctx context.Context, agent, input string) (engine.NodePatch, *apitype.Error) {
			return g.hub.PatchApply(ctx, nodeBinding(agent), agent, input)
		},
		Events: func(ev engine.Event) {
			if srv := g.srvp.Load(); srv != nil {
				srv.Publish(ev)
			}
		},
		Notify: func(agent string, n apitype.Notice) {
			if srv := g.srvp.Load(); srv != nil {
				srv.Notify(agent, n)
			}
		},
		Workspace: func(agent string) string {
			a, err := g.agents.Get(agent)
			if err != nil {
				return ""
			}
			return a.Workspace
		},
	})
	if err != nil {
		fmt.Fprintf(g.stderr, "conch serve: %v\n", err)
		return exitFor(err, ExitFailed), false
	}
	// The sandbox pods paired before this start: a pod gone meanwhile
	// ends its sessions lost before the first request sees them.
	rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
	g.pods.Resume(rctx)
	rcancel()
	g.pods.WarmPools(eng.Config)
	g.engp.Store(eng)
	g.eng = eng
	return ExitOK, true
}

// closeEngine closes the engine, first stopping its sessions with
// --stop-sessions.
func (g *serving) closeEngine() {
	if *g.o.stopSessions {
		g.eng.StopSessions()
	}
	g.eng.Close()
}

// prepareServer checks the metrics token against the others, opens the
// listeners, builds the API server and creates the first agent. On
// failure the caller closes the engine.
func (g *serving) prepareServer() (int, bool) {
	opTok, err := auth.OperatorToken(g.eng.Home())
	if err != nil {
		fmt.Fprintf(g.stderr, "conch serve: operator token: %v\n", err)
		return ExitUnavailable, false
	}
	if code, ok := g.checkMetricsToken(opTok); !ok {
		return code, false
	}
	if code, ok := g.listen(); !ok {
		return code, false
	}
	g.newServer(opTok)
	if !g.agents.Exists() {
		tok, err := g.agents.Add("main", "")
		if err != nil {
			fmt.Fprintf(g.stderr, "conch serve: create agent main: %v\n", err)
			return ExitFailed, false
		}
		fmt.Fprintf(g.stdout, "Created agent main. Its token (shown once):\n\n  %s\n\nConnect an MCP client to %s/mcp with the header\n  Authorization: Bearer %s\n\n", tok, g.base, tok)
	}
	return ExitOK, true
}

// checkMetricsToken refuses a metrics token that is the operator's or an
// agent's.
func (g *serving) checkMetricsToken(opTok string) (int, bool) {
	if g.metricsToken != "" && auth.Equal(g.metricsToken, opTok) {
		fmt.Fprintf(g.stderr, "conch serve: --metrics-token-file holds the operator token; give the scraper a token of its own\n")
		return ExitUsage, false
	}
	if _, ok := g.agents.Lookup(g.metricsToken); g.metricsToken != "" && ok {
		fmt.Fprintf(g.stderr, "conch serve: --metrics-token-file holds an agent's token; give the scraper a token of its own\n")
		return ExitUsage, false
	}
	return ExitOK, true
}

// listen opens the main listener and the metrics one.
func (g *serving) listen() (int, bool) {
	var err error
	g.ln, err = net.Listen("tcp", *g.o.listen)
	if err != nil {
		fmt.Fprintf(g.stderr, "conch serve: %v\n", err)
		return ExitUnavailable, false
	}
	if *g.o.metricsListen != "" {
		if g.mln, err = net.Listen("tcp", *g.o.metricsListen); err != nil {
			fmt.Fprintf(g.stderr, "conch serve: --metrics-listen: %v\n", err)
			g.ln.Close()
			return ExitUnavailable, false
		}
	}
	return ExitOK, true
}

// newServer builds the API server for the listener's address.
func (g *serving) newServer(opTok string) {
	scheme := "http"
	if g.useTLS {
		scheme = "https"
	}
	g.base = fmt.Sprintf("%s://%s", scheme, g.ln.Addr().String())
	g.ui = !*g.o.noUI && g.eng.Config().ServerUI()
	// Login links name the address the gateway answers on; a wildcard
	// listen (0.0.0.0, ::) is named by its loopback address.
	linkBase := g.base
	if ta, ok := g.ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		linkBase = fmt.Sprintf("%s://%s", scheme, net.JoinHostPort("127.0.0.1", fmt.Sprint(ta.Port)))
	}
	eng := g.eng
	g.srv = httpapi.New(httpapi.Options{
		Engine: eng, Home: eng.Home(), Agents: g.agents, OperatorToken: opTok, MetricsToken: g.metricsToken, Listen: *g.o.listen,
		AllowedHosts: serverList(eng.Config(), "allowedHosts"), AllowedOrigins: serverList(eng.Config(), "allowedOrigins"),
		Version: version(), Logger: g.log, UI: g.ui, PublicURL: linkBase, Nodes: g.hub,
	})
}

// serve opens the engine socket and serves the main listener, the
// socket and the metrics listener, each on its goroutine; their errors
// go to g.errc.
func (g *serving) serve() {
	g.sockPath = filepath.Join(g.eng.Home(), "run", "engine.sock")
	var err error
	g.sock, err = listenEngineSocket(g.sockPath, g.log)
	if err != nil {
		g.log.Warn("engine socket unavailable", "err", err)
	}
	g.srvp.Store(g.srv)
	g.hs = &http.Server{Handler: g.srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: httpIdleTimeout, ErrorLog: slog.NewLogLogger(g.h, slog.LevelDebug)}
	g.ss = &http.Server{Handler: g.srv.SocketHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: httpIdleTimeout}
	tcpCap, sockCap := connCaps()
	ln := limitConns(g.ln, tcpCap)
	if g.sock != nil {
		g.sock = limitConns(g.sock, sockCap)
	}
	g.errc = make(chan error, 2)
	go func() {
		if g.useTLS {
			cert, err := tls.LoadX509KeyPair(*g.o.tlsCert, *g.o.tlsKey)
			if err != nil {
				g.errc <- err
				return
			}
			g.hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			g.errc <- g.hs.ServeTLS(ln, "", "")
			return
		}
		g.errc <- g.hs.Serve(ln)
	}()
	if g.sock != nil {
		go func() { g.errc <- g.ss.Serve(g.sock) }()
	}
	g.ms = &http.Server{ReadHeaderTimeout: 10 * time.Second}
	if g.mln != nil {
		g.ms.Handler = g.srv.MetricsHandler(g.mln.Addr().String())
		go func() { g.errc <- g.ms.Serve(g.mln) }()
		g.metricsNote = ", metrics http://" + g.mln.Addr().String() + "/metrics"
	}
}

// printBanner prints the shim's note (when commands do not get the fast
// path) and the "listening on" line.
func (g *serving) printBanner() {
	uiNote := "control UI " + g.base + "/ (sign in with: conch ui)"
	if !g.ui {
		uiNote = "control UI off"
	}
	if p := g.eng.Shim(); !p.Fast() && p.Note != "" {
		fmt.Fprintf(g.stdout, "conch serve: %s\n", p.Note)
	}
	base := g.base
	fmt.Fprintf(g.stdout, "conch serve: listening on %s (MCP %s/mcp, API %s/v1, engine socket %s, %s%s)\n", base, base, base, g.sockPath, uiNote, g.metricsNote)
	g.log.Info("serving", "listen", *g.o.listen, "home", g.eng.Home())
}

// reloadOnHUP re-reads config.json at every SIGHUP.
func (g *serving) reloadOnHUP(hup <-chan os.Signal) {
	for range hup {
		if err := g.eng.Reload(); err != nil {
			g.log.Error("config reload failed; keeping the old configuration", "err", err)
		} else {
			g.log.Info("configuration reloaded")
		}
	}
}

// wait serves until a stop signal or a listener's failure and returns
// the exit code.
func (g *serving) wait(ctx context.Context) int {
	select {
	case <-ctx.Done():
		g.log.Info("shutting down: answering the calls in flight")
	case err := <-g.errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(g.stderr, "conch serve: %v\n", err)
			return ExitFailed
		}
	}
	return ExitOK
}

// shutdown stops the gateway. From now on every request that arrives,
// on any listener, is answered 503 "conch engine is shutting down."
// while the listeners stay open until the end, so no client connecting
// during the shutdown is refused. Answer every call in flight first (an
// exec call in its yield window gets its running result and the command
// keeps running), wait for the handlers to write their answers, close
// the engine, and only then close the listeners.
func (g *serving) shutdown(sctx context.Context) {
	g.srv.BeginDrain()
	g.hs.SetKeepAlivesEnabled(false)
	g.ss.SetKeepAlivesEnabled(false)
	if err := g.eng.Stop(sctx); err != nil {
		g.log.Warn("calls still in flight at shutdown", "err", err)
	}
	if err := g.srv.Drain(sctx); err != nil {
		g.log.Warn("requests still in flight at shutdown", "err", err)
	}
	g.closeEngine()
	g.hs.Close()
	g.ss.Close()
	g.ms.Shutdown(sctx)
	os.Remove(g.sockPath)
}

// readMetricsToken reads the scrape token from path (surrounding
// whitespace ignored, as Prometheus's credentials_file does). A short token
// is refused: it would be guessable.
func readMetricsToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return "", fmt.Errorf("%s holds %d characters; a metrics token needs at least 16 (e.g. openssl rand -hex 24 > %s)", path, len(tok), path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("%s holds more than one word; put the token alone in the file", path)
	}
	return tok, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serverList reads server.allowedHosts / allowedOrigins from the raw
// server section of the configuration.
func serverList(cfg *config.Config, key string) []string {
	return cfg.ServerList(key)
}

// serveEngineSocket serves api with operator rights on the home's engine
// socket, run/engine.sock, and returns its stopper, or nil when the socket
// cannot be created.
func serveEngineSocket(api *httpapi.Server, home string, log *slog.Logger) func() {
	sockPath := socketPath(home)
	sock, err := listenEngineSocket(sockPath, log)
	if err != nil {
		log.Warn("engine socket unavailable", "err", err)
		return nil
	}
	hs := &http.Server{Handler: api.SocketHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: httpIdleTimeout}
	_, sockCap := connCaps()
	go hs.Serve(limitConns(sock, sockCap))
	return func() {
		// As conch serve's listeners: answer 503 to whatever arrives
		// while the requests in flight finish, then close.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.SetKeepAlivesEnabled(false)
		api.Drain(ctx)
		hs.Close()
		os.Remove(sockPath)
	}
}

// listenEngineSocket listens on the engine socket at path: mode 0600, and
// every connection's peer must run as this process's uid (SO_PEERCRED),
// so a socket file whose mode was loosened still grants operator rights
// to no other user.
func listenEngineSocket(path string, log *slog.Logger) (net.Listener, error) {
	ln, err := unixsock.Listen(path, 0o600)
	if err != nil {
		return nil, err
	}
	return &sameUIDListener{Listener: ln, log: log}, nil
}

// sameUIDListener accepts only connections from processes of our uid.
type sameUIDListener struct {
	net.Listener
	log *slog.Logger
}

func (l *sameUIDListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			c.Close()
			continue
		}
		uid, err := supervisor.PeerUID(uc)
		if err == nil && uid == os.Getuid() {
			return c, nil
		}
		l.log.Warn("engine socket: refused a connection from another user", "uid", uid, "err", err)
		c.Close()
	}
}
