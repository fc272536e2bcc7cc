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

	"github.com/conchsh/conch/internal/unixsock"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/auth"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/httpapi"
	"github.com/conchsh/conch/internal/kube"
	"github.com/conchsh/conch/internal/nodehub"
	"github.com/conchsh/conch/internal/supervisor"
	"github.com/conchsh/conch/internal/visible"
	"github.com/conchsh/conch/internal/waitprobe"
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

// runServe is `conch serve`: the gateway.
func runServe(o *serveOpts, stdout, stderr io.Writer) int {
	home, listen, tlsCert, tlsKey, logLevel, logFormat := o.home, o.listen, o.tlsCert, o.tlsKey, o.logLevel, o.logFormat
	metricsListen, metricsTokenFile := o.metricsListen, o.metricsTokenFile
	insecure, stopSessions, noUI, followParent := o.insecure, o.stopSessions, o.noUI, o.followParent
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "conch serve: bad --log-level %q\n", *logLevel)
		return ExitUsage
	}
	var h slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})
	if *logFormat == "json" {
		// encoding/json escapes C0 but writes C1, bidi and other
		// format characters as they are: a JSON writer escapes them too,
		// so a log line read in a terminal shows what an agent sent.
		h = slog.NewJSONHandler(&visible.Writer{W: stderr, Mode: visible.ModeJSON}, &slog.HandlerOptions{Level: lvl})
	}
	log := slog.New(h)

	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		fmt.Fprintf(stderr, "conch serve: bad --listen %q: %v\n", *listen, err)
		return ExitUsage
	}
	useTLS := *tlsCert != "" || *tlsKey != ""
	if !isLoopback(host) && !useTLS && !*insecure {
		fmt.Fprintf(stderr, "conch serve: refusing to listen on %s without TLS (use --tls-cert/--tls-key, or --insecure-listen)\n", *listen)
		return ExitUsage
	}

	if *metricsListen != "" {
		mh, _, err := net.SplitHostPort(*metricsListen)
		if err != nil {
			fmt.Fprintf(stderr, "conch serve: bad --metrics-listen %q: %v\n", *metricsListen, err)
			return ExitUsage
		}
		if !isLoopback(mh) {
			fmt.Fprintf(stderr, "conch serve: --metrics-listen must be a loopback address (127.0.0.1:PORT or [::1]:PORT), not %q; to scrape from elsewhere use --metrics-token-file on the main listener\n", *metricsListen)
			return ExitUsage
		}
	}
	metricsToken := ""
	if *metricsTokenFile != "" {
		metricsToken, err = readMetricsToken(*metricsTokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "conch serve: --metrics-token-file: %v\n", err)
			return ExitUsage
		}
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
	if *followParent {
		if err := exitWithParent(stop); err != nil {
			fmt.Fprintf(stderr, "conch serve: %v\n", err)
			return ExitUnavailable
		}
		log.Info("stops when the process that started it ends (--exit-with-parent)", "parent", startPPID)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	agents := auth.Open(*home)
	// srv is set once the engine is up; engine and hub callbacks may run
	// before (reattached sessions), hence the atomic.
	var srvp atomic.Pointer[httpapi.Server]
	// The node hub restores the mirrors of node sessions before the engine
	// reattaches them.
	hub, err := nodehub.New(nodehub.Options{Home: *home, Logger: log, Ping: nodePing(), Events: func(typ string, data any) {
		if srv := srvp.Load(); srv != nil {
			srv.Publish(engine.Event{Type: typ, Data: data})
		}
	}})
	if err != nil {
		fmt.Fprintf(stderr, "conch serve: node hub: %v\n", err)
		return ExitUnavailable
	}
	defer hub.Close()
	// The kubernetes sandbox backend pairs its pods through the hub.
	pods, err := kube.New(*home, hub, log)
	if err != nil {
		fmt.Fprintf(stderr, "conch serve: kubernetes backend: %v\n", err)
		return ExitUnavailable
	}
	defer pods.Close()
	// nodeBinding reads the engine once it exists (apply_patch on a node
	// is only called after that).
	var engp atomic.Pointer[engine.Engine]
	nodeBinding := func(agent string) string {
		if e := engp.Load(); e != nil {
			return e.NodeBinding(agent)
		}
		return ""
	}
	eng, err := engine.New(engine.Options{
		Home: *home, Mode: "serve", Logger: log, Nodes: hub, Pods: pods, Probes: waitprobe.Probes{},
		PatchNode: func(ctx context.Context, agent, input string) (engine.NodePatch, *apitype.Error) {
			return hub.PatchApply(ctx, nodeBinding(agent), agent, input)
		},
		Events: func(ev engine.Event) {
			if srv := srvp.Load(); srv != nil {
				srv.Publish(ev)
			}
		},
		Notify: func(agent string, n engine.Notice) {
			if srv := srvp.Load(); srv != nil {
				srv.Notify(agent, n)
			}
		},
		Workspace: func(agent string) string {
			a, err := agents.Get(agent)
			if err != nil {
				return ""
			}
			return a.Workspace
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "conch serve: %v\n", err)
		return exitFor(err, ExitFailed)
	}
	// The sandbox pods paired before this start: a pod gone meanwhile
	// ends its sessions lost before the first request sees them.
	rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
	pods.Resume(rctx)
	rcancel()
	pods.WarmPools(eng.Config)
	engp.Store(eng)
	closeEngine := func() {
		if *stopSessions {
			eng.StopSessions()
		}
		eng.Close()
	}
	opTok, err := auth.OperatorToken(eng.Home())
	if err != nil {
		fmt.Fprintf(stderr, "conch serve: operator token: %v\n", err)
		closeEngine()
		return ExitUnavailable
	}
	if metricsToken != "" && auth.Equal(metricsToken, opTok) {
		fmt.Fprintf(stderr, "conch serve: --metrics-token-file holds the operator token; give the scraper a token of its own\n")
		closeEngine()
		return ExitUsage
	}
	if _, ok := agents.Lookup(metricsToken); metricsToken != "" && ok {
		fmt.Fprintf(stderr, "conch serve: --metrics-token-file holds an agent's token; give the scraper a token of its own\n")
		closeEngine()
		return ExitUsage
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "conch serve: %v\n", err)
		closeEngine()
		return ExitUnavailable
	}
	var mln net.Listener
	if *metricsListen != "" {
		if mln, err = net.Listen("tcp", *metricsListen); err != nil {
			fmt.Fprintf(stderr, "conch serve: --metrics-listen: %v\n", err)
			ln.Close()
			closeEngine()
			return ExitUnavailable
		}
	}
	scheme := "http"
	if useTLS {
		scheme = "https"
	}
	base := fmt.Sprintf("%s://%s", scheme, ln.Addr().String())
	ui := !*noUI && eng.Config().ServerUI()
	// Login links name the address the gateway answers on; a wildcard
	// listen (0.0.0.0, ::) is named by its loopback address.
	linkBase := base
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		linkBase = fmt.Sprintf("%s://%s", scheme, net.JoinHostPort("127.0.0.1", fmt.Sprint(ta.Port)))
	}
	srv := httpapi.New(httpapi.Options{
		Engine: eng, Home: eng.Home(), Agents: agents, OperatorToken: opTok, MetricsToken: metricsToken, Listen: *listen,
		AllowedHosts: serverList(eng.Config(), "allowedHosts"), AllowedOrigins: serverList(eng.Config(), "allowedOrigins"),
		Version: version(), Logger: log, UI: ui, PublicURL: linkBase, Nodes: hub,
	})
	if !agents.Exists() {
		tok, err := agents.Add("main", "")
		if err != nil {
			fmt.Fprintf(stderr, "conch serve: create agent main: %v\n", err)
			closeEngine()
			return ExitFailed
		}
		fmt.Fprintf(stdout, "Created agent main. Its token (shown once):\n\n  %s\n\nConnect an MCP client to %s/mcp with the header\n  Authorization: Bearer %s\n\n", tok, base, tok)
	}
	sockPath := filepath.Join(eng.Home(), "run", "engine.sock")
	sock, err := listenEngineSocket(sockPath, log)
	if err != nil {
		log.Warn("engine socket unavailable", "err", err)
	}
	srvp.Store(srv)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: httpIdleTimeout, ErrorLog: slog.NewLogLogger(h, slog.LevelDebug)}
	ss := &http.Server{Handler: srv.SocketHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: httpIdleTimeout}
	tcpCap, sockCap := connCaps()
	ln = limitConns(ln, tcpCap)
	if sock != nil {
		sock = limitConns(sock, sockCap)
	}
	errc := make(chan error, 2)
	go func() {
		if useTLS {
			cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
			if err != nil {
				errc <- err
				return
			}
			hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			errc <- hs.ServeTLS(ln, "", "")
			return
		}
		errc <- hs.Serve(ln)
	}()
	if sock != nil {
		go func() { errc <- ss.Serve(sock) }()
	}
	ms := &http.Server{ReadHeaderTimeout: 10 * time.Second}
	metricsNote := ""
	if mln != nil {
		ms.Handler = srv.MetricsHandler(mln.Addr().String())
		go func() { errc <- ms.Serve(mln) }()
		metricsNote = ", metrics http://" + mln.Addr().String() + "/metrics"
	}
	uiNote := "control UI " + base + "/ (sign in with: conch ui)"
	if !ui {
		uiNote = "control UI off"
	}
	if p := eng.Shim(); !p.Fast() && p.Note != "" {
		fmt.Fprintf(stdout, "conch serve: %s\n", p.Note)
	}
	fmt.Fprintf(stdout, "conch serve: listening on %s (MCP %s/mcp, API %s/v1, engine socket %s, %s%s)\n", base, base, base, sockPath, uiNote, metricsNote)
	log.Info("serving", "listen", *listen, "home", eng.Home())

	go func() {
		for range hup {
			if err := eng.Reload(); err != nil {
				log.Error("config reload failed; keeping the old configuration", "err", err)
			} else {
				log.Info("configuration reloaded")
			}
		}
	}()
	code := ExitOK
	select {
	case <-ctx.Done():
		log.Info("shutting down: answering the calls in flight")
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "conch serve: %v\n", err)
			code = ExitFailed
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// From now on every request that arrives, on any listener, is
	// answered 503 "conch engine is shutting down." while the listeners
	// stay open until the end, so no client connecting during the
	// shutdown is refused. Answer every call in flight first (an exec call
	// in its yield window gets its running result and the command keeps
	// running), wait for the handlers to write their answers, close the
	// engine, and only then close the listeners.
	srv.BeginDrain()
	hs.SetKeepAlivesEnabled(false)
	ss.SetKeepAlivesEnabled(false)
	if err := eng.Stop(sctx); err != nil {
		log.Warn("calls still in flight at shutdown", "err", err)
	}
	if err := srv.Drain(sctx); err != nil {
		log.Warn("requests still in flight at shutdown", "err", err)
	}
	closeEngine()
	hs.Close()
	ss.Close()
	ms.Shutdown(sctx)
	os.Remove(sockPath)
	return code
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
