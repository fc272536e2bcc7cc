package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/auth"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/waitprobe"
)

// The session commands of the CLI (interfaces.md §4) talk to an engine in
// one of three ways, chosen per command: a gateway named by --gateway
// (HTTP, bearer token), the home's engine socket when a `conch serve`
// listens on it (operator rights, no token), or else an engine run
// in-process on the home. Sessions started in-process keep running under
// their supervisors after the command exits.

// Exit codes of exec and `wait --until exit` (interfaces.md §4.1) beyond
// the command's own status.
const (
	exitTimeout     = 124 // conch's timeout (also `wait` timed out)
	exitConchError  = 125 // lost session, or conch failed before the command ran
	exitNoWait      = 75  // approval pending with --no-wait
	exitDenied      = 77  // denied by policy or by the approver
	exitInterrupted = 130 // interrupted before a session existed
)

const clientUsage = `Session commands:
  conch exec [flags] -- CMD…        run a command (one argument = shell text; several are quoted and joined)
  conch ps [--all-agents]           list sessions
  conch poll ID [--since C] [--timeout MS] [--raw]
  conch log ID [--offset N] [--limit N] [--since C] [-f] [--raw] [--stream S]
  conch wait ID [--until U,…] [--pattern RE] [-i] [--since C] [--host H] [--port P] [--url U] [--path P] [--idle MS] [--timeout MS]
  conch search ID PATTERN [-i] [-C N] [--max N] [--since C]
  conch screen ID
  conch send ID [--data S] [--eof] [--keys K,K] [--hex H,H] [--literal S] [--paste S] [--no-bracket] [--submit] [--delay MS]
  conch kill ID | clear ID | rm ID
  conch apply-patch [--workdir DIR] < PATCH   apply a "*** Begin Patch" patch (apply_patch tool)
  conch agents add NAME [--workspace DIR] | list | remove NAME | token NAME --rotate
                                    manage the gateway's agents and their tokens
Global flags: --home DIR, --config FILE, --gateway URL, --token T, --agent NAME, --json, --log-level L
`

// runClientCommand runs the session commands of the CLI (exec, ps, poll,
// log, kill, …) against a gateway or the home; ok is false for a name that
// is not one of them.
func runClientCommand(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int, ok bool) {
	switch name {
	case "exec":
		return runExec(args, stdin, stdout, stderr), true
	case "apply-patch":
		return runApplyPatch(args, stdin, stdout, stderr), true
	case "ps":
		return runPS(args, stdout, stderr), true
	case "poll", "log", "wait", "search", "screen", "send", "kill", "clear", "rm":
		return runSessionCommand(name, args, stdout, stderr), true
	}
	return 0, false
}

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

func addGlobalFlags(fs *flag.FlagSet) *globalFlags {
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

// newFlagSet returns a flag set that reports errors on stderr with a
// one-line synopsis.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: conch %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseInterleaved parses flags that may come before, between and after
// positional arguments; everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// backend is one way to reach an engine.
type backend interface {
	// exec and process run a tool. A failed call (a details object with
	// an error) comes back as the result plus a *client.Error; any other
	// error means the engine could not be reached.
	exec(ctx context.Context, params map[string]any) (client.Result, error)
	process(ctx context.Context, params map[string]any) (client.Result, error)
	// applyPatch runs apply_patch with a patch; failures as for exec.
	applyPatch(ctx context.Context, input string) (client.Result, error)
	// sessions lists the agent's sessions, or every agent's.
	sessions(ctx context.Context, allAgents bool) (client.Result, error)
	// follow calls fn with the session's output after since until the
	// session ends, and returns its end state.
	follow(ctx context.Context, id string, o followOpts, fn func(stream, text string)) (sessionEnd, error)
	// recording writes a PTY session as an asciicast v2 file to w.
	recording(ctx context.Context, id string, w io.Writer) error
	// local is the in-process engine, or nil.
	local() *engine.Engine
	close()
}

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

// connect picks the backend: --gateway, else the engine socket, else an
// in-process engine. A home held by an engine that does not serve the
// socket (yet) is retried for a few seconds.
func (g *globalFlags) connect() (backend, error) {
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
	c, err := g.remoteClient()
	if err != nil {
		return nil, err
	}
	if c != nil {
		return &remoteBackend{c: c}, nil
	}
	opt := engine.Options{Home: g.home, Mode: "cli", Probes: waitprobe.Probes{}}
	if g.config != "" {
		cfg, err := config.Load(g.config)
		if err != nil {
			return nil, err
		}
		opt.Config = cfg
	}
	if g.logLevel != "" {
		var lvl slog.Level
		if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
			return nil, fmt.Errorf("bad --log-level %q", g.logLevel)
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
	deadline := time.Now().Add(3 * time.Second)
	for {
		eng, err := engine.New(opt)
		if err == nil {
			// While this command holds the home, other commands, conch
			// mcp and conch serve reach it through its engine socket.
			log := opt.Logger
			if log == nil {
				log = slog.New(slog.DiscardHandler)
			}
			return &localBackend{eng: eng, agent: g.agent, workdir: g.workdir, stopSock: serveEngineSocket(eng, log)}, nil
		}
		if !errors.Is(err, engine.ErrHomeLocked) || time.Now().After(deadline) {
			return nil, connectError{err}
		}
		// Another engine holds the home: a starting `conch serve` opens
		// its socket shortly; a short-lived CLI command lets go.
		time.Sleep(100 * time.Millisecond)
		if sock := socketPath(g.home); socketAlive(sock) {
			c, err := client.New(client.Options{Socket: sock, Agent: g.agent, Workdir: g.workdir})
			if err != nil {
				return nil, err
			}
			return &remoteBackend{c: c}, nil
		}
	}
}

// remoteBackend reaches an engine through its HTTP API.
type remoteBackend struct{ c *client.Client }

func (r *remoteBackend) recording(ctx context.Context, id string, w io.Writer) error {
	return r.c.Recording(ctx, id, w)
}

func (r *remoteBackend) exec(ctx context.Context, p map[string]any) (client.Result, error) {
	return r.c.Exec(ctx, p)
}

func (r *remoteBackend) process(ctx context.Context, p map[string]any) (client.Result, error) {
	return r.c.Process(ctx, p)
}

func (r *remoteBackend) sessions(ctx context.Context, all bool) (client.Result, error) {
	return r.c.Sessions(ctx, client.SessionsOptions{AllAgents: all})
}

func (r *remoteBackend) follow(ctx context.Context, id string, o followOpts, fn func(stream, text string)) (sessionEnd, error) {
	end, err := r.c.Stream(ctx, id, client.StreamOptions{Since: o.since, Raw: o.raw, Stream: o.stream}, func(out client.Output) error {
		if o.stream == "" || o.stream == "both" || out.Stream == o.stream || out.Stream == "both" {
			fn(out.Stream, out.Text)
		}
		return nil
	})
	if err != nil {
		return sessionEnd{}, err
	}
	return completeEnd(ctx, r, id, sessionEnd{End: end})
}

func (r *remoteBackend) local() *engine.Engine { return nil }
func (r *remoteBackend) close()                {}

// localBackend runs an engine in this process.
func (l *localBackend) recording(_ context.Context, id string, w io.Writer) error {
	err := l.eng.Asciicast(l.agent, id, w)
	var ae *apitype.Error
	if errors.As(err, &ae) {
		return &client.Error{Status: apitype.HTTPStatus(ae.Code), Code: ae.Code, Message: ae.Message}
	}
	return err
}

type localBackend struct {
	eng      *engine.Engine
	agent    string
	workdir  string // the calls' default working directory (globalFlags.workdir)
	stopSock func() // stops the engine socket; nil if none
}

func (l *localBackend) call(ctx context.Context, tool string, p map[string]any) (client.Result, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return client.Result{}, err
	}
	if l.workdir != "" {
		ctx = engine.WithWorkdir(ctx, l.workdir)
	}
	r := l.eng.Call(ctx, l.agent, tool, b)
	det, err := json.Marshal(r.Details)
	if err != nil {
		return client.Result{}, err
	}
	res := client.Result{Text: r.Text, Details: det}
	if d, ok := r.Details.(*apitype.ErrorDetails); ok && d.Error != nil {
		return res, &client.Error{Status: httpStatus(d.Error.Code), Code: d.Error.Code, Message: d.Error.Message}
	}
	return res, nil
}

func (l *localBackend) exec(ctx context.Context, p map[string]any) (client.Result, error) {
	return l.call(ctx, "exec", p)
}

func (l *localBackend) process(ctx context.Context, p map[string]any) (client.Result, error) {
	return l.call(ctx, "process", p)
}

func (l *localBackend) local() *engine.Engine { return l.eng }
func (l *localBackend) close() {
	if l.stopSock != nil {
		l.stopSock()
	}
	l.eng.Close()
}

func httpStatus(code string) int { return apitype.HTTPStatus(code) }

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
	Outcome    string   `json:"outcome"`
	Fired      string   `json:"fired"`
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
	return sessionEnd{End: client.End{State: d.State, ExitCode: d.ExitCode, Signal: d.Signal, KilledBy: d.KilledBy}, Reason: d.Reason}
}

// completeEnd fills in what a stream's end event may lack (killedBy, the
// reason) from a poll at the end of the output.
func completeEnd(ctx context.Context, be backend, id string, e sessionEnd) (sessionEnd, error) {
	if e.State == "exited" {
		return e, nil
	}
	r, err := be.process(ctx, map[string]any{"action": "poll", "sessionId": id, "since": float64(1 << 53)})
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
// (exec.md §8: one per line, "[conch event] " first, a notice may carry
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
