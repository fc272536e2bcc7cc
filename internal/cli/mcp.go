package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/adapter/httpapi"
	"github.com/conchsh/conch/internal/adapter/mcpserver"
	"github.com/conchsh/conch/internal/adapter/waitprobe"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/store/auth"
	"github.com/spf13/cobra"
)

func (a *app) mcpCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp [--home DIR] [--agent NAME] [--workdir DIR]",
		Short: "Serve the exec and process tools (and apply_patch when enabled) over MCP stdio",
		Long: `Serve the tools over MCP on stdin and stdout, for an MCP client that starts conch
as a subprocess. It runs the engine of the home itself, or, when a conch serve
(or another conch mcp) holds the home, forwards the calls to it through the
engine socket. Logs go to stderr.`,
		Example: `  conch mcp
  claude mcp add conch -- conch mcp --agent main`,
		Args: args(),
	}
	fs := cmd.Flags()
	home := fs.String("home", defaultHome(), "conch home, the state directory (env CONCH_HOME)")
	agent := fs.String("agent", envOr("CONCH_AGENT", "main"), "agent the calls act for (env CONCH_AGENT)")
	workdir := fs.String("workdir", "", "default working directory of commands (default: current directory)")
	logLevel := fs.String("log-level", envOr("CONCH_LOG", "warn"), "debug, info, warn or error (logs go to stderr)")
	cmd.RunE = a.runs(func(*cobra.Command, []string) int {
		return runMCP(*home, *agent, *workdir, *logLevel, a.stdin, a.stdout, a.stderr)
	})
	// Standard output is the MCP stream: JSON-RPC, written as it is.
	return annotate(cmd, annStdout, "raw")
}

// runMCP is `conch mcp`.
func runMCP(home_, agent_, workdir_, logLevel_ string, stdin io.Reader, stdout, stderr io.Writer) int {
	home, agent, workdir := home_, agent_, workdir_
	if !config.ValidAgent(agent) {
		fmt.Fprintf(stderr, "conch mcp: invalid agent id %q: use [a-z0-9][a-z0-9_-]{0,63}\n", agent)
		return ExitUsage
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(logLevel_)); err != nil {
		fmt.Fprintf(stderr, "conch mcp: bad --log-level %q\n", logLevel_)
		return ExitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	// Signals are caught from here on: a stop signal while the engine
	// starts stops it once it has started, and SIGHUP never ends the
	// process (its default action).
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	stopTracing, ok := startTracing("mcp", stderr)
	if !ok {
		return ExitUsage
	}
	defer stopTracing()
	var srv *mcpserver.Server
	engOpt := engine.Options{
		Home: home, Workdir: workdir, Mode: "mcp", Logger: log, Probes: waitprobe.Probes{},
		Notify: func(agent string, n apitype.Notice) {
			if srv != nil {
				srv.Notify(agent, n)
			}
		},
	}
	eng, backend, closeLink, err := openMCPBackend(engOpt, agent, log)
	defer closeLink()
	if err != nil {
		fmt.Fprintf(stderr, "conch mcp: %v\n", err)
		return exitFor(err, ExitFailed)
	}
	if eng != nil {
		defer eng.Close()
		// As the engine of the home, serve its socket: the CLI and other
		// conch mcp processes reach this engine through it.
		api := httpapi.New(httpapi.Options{Engine: eng, Home: eng.Home(), Agents: auth.Open(eng.Home()), Version: version(), Logger: log})
		if stopSock := serveEngineSocket(api, eng.Home(), log); stopSock != nil {
			defer stopSock()
		}
	}
	srv = mcpserver.New(backend, mcpserver.Options{Agent: agent, Version: version(), Logger: log})
	go reloadMCPOnHUP(hup, eng, log)
	return serveMCPStdio(srv, eng, backend, stdin, stdout, sig, log)
}

// openMCPBackend starts the engine of the home, or, when another engine
// (conch serve) holds it, a proxy to that one: eng is nil then. The
// engine may be a CLI command's, which exits with its command: then the
// proxy starts one of its own (homeLink), which closeLink closes.
func openMCPBackend(engOpt engine.Options, agent string, log *slog.Logger) (eng *engine.Engine, backend mcpserver.Engine, closeLink func(), err error) {
	closeLink = func() {}
	eng, err = engine.New(engOpt)
	backend = eng
	if !errors.Is(err, engine.ErrHomeLocked) {
		return eng, backend, closeLink, err
	}
	home := engOpt.Home
	cfg, cerr := config.Load(filepath.Join(home, "config.json"))
	if cerr != nil {
		// The proxy needs the configuration too (the tool list).
		return eng, backend, closeLink, cerr
	}
	link := &homeLink{home: home, open: func() (*engine.Engine, *slog.Logger, error) {
		e, err := engine.New(engOpt)
		return e, log, err
	}}
	closeLink = link.close
	p := newSocketEngine(link.dial, agent, engOpt.Workdir, cfg)
	if p.ping() {
		log.Info("proxying to the engine that holds the home", "home", home)
		backend, err = p, nil
	}
	return eng, backend, closeLink, err
}

// reloadMCPOnHUP re-reads config.json at every SIGHUP (a proxy only
// says it does not).
func reloadMCPOnHUP(hup <-chan os.Signal, eng *engine.Engine, log *slog.Logger) {
	for range hup {
		if eng == nil {
			// A proxy's tool list is fixed at its start; the engine
			// it proxies to reloads on its own SIGHUP.
			log.Warn("SIGHUP: a proxying conch mcp does not reload config.json; send SIGHUP to the engine that holds the home")
			continue
		}
		if err := eng.Reload(); err != nil {
			log.Error("config reload failed; keeping the old configuration", "err", err)
		}
	}
}

// serveMCPStdio serves MCP on stdin and stdout until the client goes
// away or a stop signal comes (then stopMCP answers the calls in flight;
// a second signal ends at once).
func serveMCPStdio(srv *mcpserver.Server, eng *engine.Engine, backend mcpserver.Engine, stdin io.Reader, stdout io.Writer, sig <-chan os.Signal, log *slog.Logger) int {
	stdio := mcpserver.NewStdio(stdin, stdout)
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(runCtx, stdio.Transport()) }()
	select {
	case err := <-runErr:
		// stdin closed: the client went away.
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			log.Debug("mcp session ended", "err", err)
		}
		return ExitOK
	case <-sig:
	}
	proxy, _ := backend.(*socketEngine)
	stopMCP(eng, proxy, srv, stdio, sig, log)
	cancelRun()
	select {
	case <-runErr:
	case <-sig:
	}
	return ExitOK
}

// stopMCP is the orderly stop of `conch mcp` on SIGTERM or SIGINT: every
// call in flight gets its answer on stdout before the session closes (the
// SDK drops the answers of calls still in flight when it closes). The
// engine answers its calls at once (engine.Stop: an exec call in its yield
// window returns running with its session id, and the command keeps
// running); a proxy asks the engine it proxies to for the answers of its
// calls at once (an engine too old for that answers them at the latest
// when their yield windows end). A second signal stops waiting.
func stopMCP(eng *engine.Engine, proxy *socketEngine, srv *mcpserver.Server, stdio *mcpserver.Stdio, sig <-chan os.Signal, log *slog.Logger) {
	log.Info("stopping: answering the calls in flight")
	srv.Stop()
	// The longest yield window (120 s) and then some.
	ctx, cancel := context.WithTimeout(context.Background(), 130*time.Second)
	defer cancel()
	go func() {
		select {
		case <-sig:
			cancel()
		case <-ctx.Done():
		}
	}()
	if eng != nil {
		if err := eng.Stop(ctx); err != nil {
			log.Warn("calls still in flight at exit", "err", err)
		}
	}
	if proxy != nil {
		if err := proxy.stopCalls(ctx); err != nil {
			log.Warn("the engine could not be asked to answer the calls in flight now; waiting for their answers", "err", err)
		}
	}
	if err := stdio.Answered(ctx); err != nil {
		log.Warn("calls left unanswered at exit", "err", err)
	}
}
