package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/adapter/httpapi"
	"github.com/conchsh/conch/internal/adapter/waitprobe"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/store/auth"
	"github.com/spf13/pflag"
)

// The client commands reach an engine in one way: package client, against
// a gateway named by --gateway (HTTP, bearer token), else the home's
// engine socket when something serves it (operator rights, no token), else
// an engine started in this process for the command's duration, whose API
// is served in this process (and on the home's engine socket, for other
// commands) and reached with the same client. Sessions started that way
// keep running under their supervisors after the command exits.

// globalFlags are the flags every client command takes.
type globalFlags struct {
	home, config, gateway, token, agent, logLevel string
	json                                          bool
	// workdir is the default working directory of the calls to an engine
	// on this machine (the engine socket or in-process): apply-patch's
	// --workdir, else the directory the CLI runs in (see connect). A
	// remote gateway (--gateway) never gets it: a local path means
	// nothing on another machine.
	workdir string
}

func addGlobalFlags(fs *pflag.FlagSet) *globalFlags {
	g := &globalFlags{}
	fs.StringVar(&g.home, "home", defaultHome(), "conch home (env CONCH_HOME)")
	fs.StringVar(&g.config, "config", os.Getenv("CONCH_CONFIG"), "configuration file for an in-process engine (env CONCH_CONFIG; default HOME/config.json)")
	fs.StringVar(&g.gateway, "gateway", os.Getenv("CONCH_GATEWAY"), "gateway URL (env CONCH_GATEWAY; default: the home's engine socket, else an in-process engine)")
	// The token's default is read after parsing so that it never shows in
	// the help text.
	fs.StringVar(&g.token, "token", "", "bearer token for --gateway (env CONCH_TOKEN; default: HOME/operator.token)")
	fs.StringVar(&g.agent, "agent", envOr("CONCH_AGENT", "main"), "agent to act for (env CONCH_AGENT)")
	fs.BoolVar(&g.json, "json", false, "print the raw {text, details} result")
	fs.StringVar(&g.logLevel, "log-level", os.Getenv("CONCH_LOG"), "log level of an in-process engine (debug, info, warn, error; default: none)")
	return g
}

// conn is a client connected to an engine, and what to release after.
type conn struct {
	*client.Client
	// eng is the engine this process started, or nil.
	eng  *engine.Engine
	stop func()
}

func (c *conn) close() {
	if c.stop != nil {
		c.stop()
	}
}

// connectError is a failure to reach any engine.
type connectError struct{ err error }

func (e connectError) Error() string { return e.err.Error() }
func (e connectError) Unwrap() error { return e.err }

// socketPath is the engine socket of a home.
func socketPath(home string) string { return filepath.Join(home, "run", "engine.sock") }

// socketAlive reports whether something accepts connections on path.
func socketAlive(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// operatorToken reads the operator token of a home, or "". An empty token
// file (a write cut short) is said on stderr, not sent as no token in
// silence; any other content is sent as it is: the gateway judges it.
func operatorToken(home string) string {
	b, err := os.ReadFile(auth.OperatorTokenPath(home))
	if err != nil {
		return ""
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		_, err := auth.ReadOperatorToken(home)
		fmt.Fprintf(os.Stderr, "conch: %v\n", err)
	}
	return tok
}

// gatewayToken is the bearer token for --gateway: the --token flag, else
// CONCH_TOKEN, else the home's operator token, else "".
func gatewayToken(flagToken, home string) string {
	if flagToken != "" {
		return flagToken
	}
	if tok := os.Getenv("CONCH_TOKEN"); tok != "" {
		return tok
	}
	return operatorToken(home)
}

// remoteClient returns a client for --gateway, or for the engine socket of
// the home when one answers; nil when neither applies.
func (g *globalFlags) remoteClient() (*client.Client, error) {
	if g.gateway != "" {
		return client.New(client.Options{Gateway: g.gateway, Token: gatewayToken(g.token, g.home), Agent: g.agent})
	}
	if sock := socketPath(g.home); socketAlive(sock) {
		return client.New(client.Options{Socket: sock, Agent: g.agent, Workdir: g.workdir})
	}
	return nil, nil
}

// connect returns a client: for --gateway, else the engine socket, else an
// engine started in this process (see inProcess). A home held by an
// engine that does not serve the socket (yet) is retried for a few
// seconds.
func (g *globalFlags) connect() (*conn, error) {
	if !config.ValidAgent(g.agent) {
		return nil, fmt.Errorf("invalid agent id %q: use [a-z0-9][a-z0-9_-]{0,63}", g.agent)
	}
	// A CLI command runs where the user is: the engine's own directory
	// (where `conch serve` was started) is no default for a command typed
	// elsewhere.
	if g.gateway == "" && g.workdir == "" {
		if wd, err := os.Getwd(); err == nil {
			g.workdir = wd
		}
	}
	if g.gateway != "" {
		c, err := g.remoteClient()
		if err != nil {
			return nil, err
		}
		return &conn{Client: c}, nil
	}
	if socketAlive(socketPath(g.home)) {
		return g.socketConn()
	}
	opt, err := g.engineOptions()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		eng, err := engine.New(opt)
		if err == nil {
			return g.inProcess(eng, opt.Logger)
		}
		if !errors.Is(err, engine.ErrHomeLocked) || time.Now().After(deadline) {
			return nil, connectError{err}
		}
		// Another engine holds the home: a starting `conch serve` opens
		// its socket shortly; a short-lived CLI command lets go.
		time.Sleep(100 * time.Millisecond)
		if socketAlive(socketPath(g.home)) {
			return g.socketConn()
		}
	}
}

// engineOptions are the options of an engine this process starts.
func (g *globalFlags) engineOptions() (engine.Options, error) {
	opt := engine.Options{Home: g.home, Mode: "cli", Probes: waitprobe.Probes{}}
	if g.config != "" {
		cfg, err := config.Load(g.config)
		if err != nil {
			return opt, err
		}
		opt.Config = cfg
	}
	if g.logLevel != "" {
		var lvl slog.Level
		if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
			return opt, fmt.Errorf("bad --log-level %q", g.logLevel)
		}
		opt.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	}
	agents := auth.Open(g.home)
	opt.Workspace = func(agent string) string {
		a, err := agents.Get(agent)
		if err != nil {
			return ""
		}
		return a.Workspace
	}
	return opt, nil
}

// socketConn is a client of the engine serving the home's engine socket.
// That engine may be another CLI command's, which exits when its command
// ends: when nothing serves the socket any more, the connection goes to an
// engine this process starts then (see homeLink), so a command that
// follows a session outlives the engine it got through.
func (g *globalFlags) socketConn() (*conn, error) {
	l := &homeLink{home: g.home, open: func() (*engine.Engine, *slog.Logger, error) {
		opt, err := g.engineOptions()
		if err != nil {
			return nil, nil, err
		}
		eng, err := engine.New(opt)
		return eng, opt.Logger, err
	}}
	c, err := client.New(client.Options{
		Gateway: "http://engine", Agent: g.agent, Workdir: g.workdir,
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: l.dial, MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second}},
	})
	if err != nil {
		return nil, err
	}
	return &conn{Client: c, stop: l.close}, nil
}

// homeLink dials the engine of a home: its engine socket, else an engine
// started in this process (by open) once the socket has no server (its
// file gone, or refusing connections), the home is free and its last
// holder was not a conch serve (which is expected back). Its clients
// (a CLI command, a proxying conch mcp) thus outlive the engine they got
// through, which may be another CLI command's that exits with it.
type homeLink struct {
	home string
	open func() (*engine.Engine, *slog.Logger, error)

	mu     sync.Mutex
	mem    *memListener // the in-process engine's, once started
	stop   func()
	closed bool
}

func (l *homeLink) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	l.mu.Lock()
	mem := l.mem
	l.mu.Unlock()
	if mem != nil {
		return mem.dial(ctx, "", "")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socketPath(l.home))
	if err == nil || !(errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)) {
		return c, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, err
	}
	if l.mem != nil {
		return l.mem.dial(ctx, "", "")
	}
	if lastHolder(l.home) == "serve" {
		// A gateway is stopped to be started again (a restart, an
		// upgrade): taking its home would keep it from starting.
		return nil, err
	}
	// The engine that served the socket may still be letting go of the
	// home, or another one may have just taken it and opens the socket
	// shortly: either is waited for a few seconds, as connect does.
	deadline := time.Now().Add(5 * time.Second)
	for {
		eng, log, eerr := l.open()
		if eerr == nil {
			l.mem, l.stop = serveInProcess(eng, log)
			return l.mem.dial(ctx, "", "")
		}
		if !errors.Is(eerr, engine.ErrHomeLocked) || time.Now().After(deadline) {
			return nil, fmt.Errorf("%w (and no engine could start here: %v)", err, eerr)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if c, err := d.DialContext(ctx, "unix", socketPath(l.home)); err == nil {
			return c, nil
		}
	}
}

// lastHolder is the kind of process ("serve", "mcp", "cli") that holds the
// home's engine lock or held it last, from the lock file's record.
func lastHolder(home string) string {
	b, _ := os.ReadFile(filepath.Join(home, "run", "engine.lock"))
	_, mode, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	return mode
}

// transportError reports whether err is a failure to reach the engine or
// to read its answer, rather than an answer.
func transportError(err error) bool {
	var ae *client.Error
	return err != nil && !errors.As(err, &ae)
}

func (l *homeLink) close() {
	l.mu.Lock()
	stop := l.stop
	l.closed, l.stop = true, nil
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// inProcess serves the API of an engine this process started: on the
// home's engine socket, so that other commands, conch mcp and conch serve
// reach it while this command holds the home, and in memory for this
// command's own client (the same handler; a socket path too long for
// the kernel does not matter to it).
func (g *globalFlags) inProcess(eng *engine.Engine, log *slog.Logger) (*conn, error) {
	mem, stop := serveInProcess(eng, log)
	c, err := client.New(client.Options{
		Gateway: "http://engine", Agent: g.agent, Workdir: g.workdir,
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: mem.dial}},
	})
	if err != nil {
		stop()
		return nil, err
	}
	return &conn{Client: c, eng: eng, stop: stop}, nil
}

// serveInProcess serves eng's API on the home's engine socket and on an
// in-memory listener, and returns that listener and the stopper of both
// and of eng.
func serveInProcess(eng *engine.Engine, log *slog.Logger) (*memListener, func()) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	api := httpapi.New(httpapi.Options{Engine: eng, Home: eng.Home(), Agents: auth.Open(eng.Home()), Version: version(), Logger: log})
	stopSock := serveEngineSocket(api, eng.Home(), log)
	mem := newMemListener()
	hs := &http.Server{Handler: api.SocketHandler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(mem)
	return mem, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		if stopSock != nil {
			stopSock()
		}
		eng.Close()
	}
}

// memListener is a net.Listener whose connections are in-memory pipes.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, cl := net.Pipe()
	select {
	case l.conns <- server:
		return cl, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "engine" }

// followOpts select what follow delivers.
type followOpts struct {
	since  int64
	raw    bool
	stream string // "", both, stdout, stderr
}

// sessionEnd is how a session ended: the end state plus, when known, the
// reason text of the engine.
type sessionEnd struct {
	client.End
	Reason string
	// Loss is output gone for good (the journal cap, a full home).
	Loss apitype.OutputLoss
}

// follow calls fn with the session's output after o.since until the
// session ends, and returns its end state.
func (c *conn) follow(ctx context.Context, id string, o followOpts, fn func(stream, text string)) (sessionEnd, error) {
	end, err := c.Stream(ctx, id, client.StreamOptions{Since: o.since, Raw: o.raw, Stream: o.stream}, func(out client.Output) error {
		if o.stream == "" || o.stream == "both" || out.Stream == o.stream || out.Stream == "both" {
			fn(out.Stream, out.Text)
		}
		return nil
	})
	if err != nil {
		return sessionEnd{}, err
	}
	return c.completeEnd(ctx, id, sessionEnd{End: end})
}

// endDetails are the fields of exec, poll, wait and list details that
// describe how a run ended.
type endDetails struct {
	Status     string   `json:"status"`
	State      string   `json:"state"`
	SessionID  string   `json:"sessionId"`
	ExitCode   *int     `json:"exitCode"`
	Signal     *string  `json:"signal"`
	KilledBy   *string  `json:"killedBy"`
	Reason     string   `json:"reason"`
	Cursor     int64    `json:"cursor"`
	Aggregated *string  `json:"aggregated"`
	Warnings   []string `json:"warnings"`
	apitype.OutputLoss
	Outcome string `json:"outcome"`
	Fired   string `json:"fired"`
	// approval-pending
	ApprovalID   string `json:"approvalId"`
	ApprovalSlug string `json:"approvalSlug"`
	// error results
	Error *apitype.Error `json:"error"`
}

func decodeEnd(r client.Result) endDetails {
	var d endDetails
	json.Unmarshal(r.Details, &d)
	return d
}

func (d endDetails) end() sessionEnd {
	return sessionEnd{End: client.End{State: d.State, ExitCode: d.ExitCode, Signal: d.Signal, KilledBy: d.KilledBy}, Reason: d.Reason, Loss: d.OutputLoss}
}

// completeEnd fills in what a stream's end event lacks (killedBy, the
// reason, output gone for good) from a poll at the end of the output.
func (c *conn) completeEnd(ctx context.Context, id string, e sessionEnd) (sessionEnd, error) {
	r, err := c.Process(ctx, map[string]any{"action": "poll", "sessionId": id, "since": float64(1 << 53)})
	if err != nil {
		return e, nil // the end state we have is good enough
	}
	d := decodeEnd(r)
	if d.Status == "running" || d.Status == "pending" || d.State == "" {
		return e, nil
	}
	return d.end(), nil
}

// printJSON writes a result as one line of JSON.
func printJSON(w io.Writer, r client.Result) {
	if r.Details == nil {
		r.Details = json.RawMessage("null")
	}
	b, _ := json.Marshal(r)
	fmt.Fprintf(w, "%s\n", b)
}

// splitEvents separates the inline exec events that open a result text
// (one per line, "[conch event] " first, a notice may carry
// its snippet on a second line, then a blank line) from the rest.
func splitEvents(text string) (events []string, rest string) {
	if !strings.HasPrefix(text, "[conch event] ") {
		return nil, text
	}
	block, rest, _ := strings.Cut(text, "\n\n")
	return strings.Split(block, "\n"), rest
}

// printChunk prints a piece of followed output: events on stderr, stderr
// output on stderr, the rest on stdout.
func printChunk(stdout, stderr io.Writer, stream, text string) {
	events, text := splitEvents(text)
	for _, e := range events {
		fmt.Fprintln(stderr, e)
	}
	if stream == "stderr" {
		stdout = stderr
	}
	printText(stdout, text)
}

// printText writes s followed by a newline unless it ends with one.
func printText(w io.Writer, s string) {
	if s == "" {
		return
	}
	io.WriteString(w, s)
	if !strings.HasSuffix(s, "\n") {
		io.WriteString(w, "\n")
	}
}
