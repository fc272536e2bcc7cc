// Command conch is a shell-execution gateway for AI agents: it gives agents
// an exec tool to run commands and a process tool to steer the ones that
// keep running, over MCP.
//
// Usage:
//
//	conch mcp [--home DIR] [--agent NAME] [--workdir DIR]   stdio MCP server
//	conch version                                            print the version
//
// `conch supervise` is internal: the engine starts one per session.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/mcpserver"
	"github.com/conchsh/conch/internal/sandbox"
	"github.com/conchsh/conch/internal/supervisor"
	"github.com/conchsh/conch/internal/waitprobe"
)

// Exit codes of interfaces.md §4.1.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnavailable = 6
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `conch: a shell-execution gateway for AI agents

Usage:
  conch serve [--listen ADDR] [--home DIR] [--no-ui]       run the gateway: MCP at /mcp, HTTP API at /v1, events, control UI at /
  conch mcp [--home DIR] [--agent NAME] [--workdir DIR]   serve the exec and process tools (and apply_patch when enabled) over MCP stdio
  conch node --gateway URL --token T [--name N] [--ca FILE] [--home DIR]
                                                           run a node host that dials out to a gateway
  conch nodes list | invite [--ttl 24h] [--once] | approve ID | rename ID NAME | remove ID
                                                           pair and manage node hosts
  conch approvals pending                                  list approval requests waiting for a decision
  conch approvals approve ID [--always] | deny ID          decide one (ID = id or slug)
  conch approvals decide ID DECISION                       allow-once | allow-always | deny (and aliases)
  conch approvals get | set FILE|- --base-hash H | import [PATH] [--replace]
                                                           read, replace (optimistic) or import the approvals file
  conch policy explain [--agent A] [--cwd DIR] -- CMD      show how the policy judges a command
  conch ledger verify | tail [-n N] [--session ID]         check or read the audit ledger
  conch ledger verify --pubkey KEY --checkpoint C          check it against a saved public key and checkpoint
  conch ledger key                                         print the ledger's public key (created if missing)
  conch agents defaults NAME [k=v…] [--clear]              per-agent exec defaults (host, security, ask, node)
  conch config schema [config|approvals]                   print the JSON Schema of config.json or exec-approvals.json
  conch doctor [--json]                                    audit the home, the policy and the machine
  conch ui [--print]                                       one-time login link for the control UI of conch serve
  conch sandbox status | list | recreate (--agent A|--all) | prune
                                                           sandbox backend and layers per agent; docker sandboxes
  conch version                                            print version information

Environment: CONCH_HOME (default ~/.conch), CONCH_AGENT (default main).
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage+clientUsage)
		return exitUsage
	}
	switch args[0] {
	case "mcp":
		return runMCP(args[1:], stdin, stdout, stderr)
	case "serve":
		return runServe(args[1:], stdout, stderr)
	case "supervise":
		return supervisor.Main(args[1:])
	case "sandbox":
		return runSandbox(args[1:], stdout, stderr)
	case "sandbox-init":
		return sandbox.InitMain(args[1:])
	case "node":
		return runNode(args[1:], stdout, stderr)
	case "nodes":
		return runNodes(args[1:], stdout, stderr)
	case "approvals":
		return runApprovals(args[1:], stdout, stderr)
	case "policy":
		return runPolicy(args[1:], stdout, stderr)
	case "ledger":
		return runLedger(args[1:], stdout, stderr)
	case "agents":
		if len(args) > 1 && args[1] != "defaults" {
			return runAgentsClient(args[1:], stdout, stderr)
		}
		return runAgents(args[1:], stdout, stderr)
	case "config":
		return runConfig(args[1:], stdout, stderr)
	case "doctor":
		return runDoctor(args[1:], stdout, stderr)
	case "ui":
		return runUI(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "conch %s (%s, %s)\n", version(), commit(), runtime.Version())
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage+clientUsage)
		return exitOK
	}
	if code, ok := runClientCommand(args[0], args[1:], stdin, stdout, stderr); ok {
		return code
	}
	fmt.Fprintf(stderr, "conch: unknown command %q\n\n%s", args[0], usage+clientUsage)
	return exitUsage
}

func defaultHome() string {
	if h := os.Getenv("CONCH_HOME"); h != "" {
		return h
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".conch"
	}
	return filepath.Join(home, ".conch")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func runMCP(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", defaultHome(), "conch home (state directory)")
	agent := fs.String("agent", envOr("CONCH_AGENT", "main"), "agent the calls act for")
	workdir := fs.String("workdir", "", "default working directory of commands (default: current directory)")
	logLevel := fs.String("log-level", envOr("CONCH_LOG", "warn"), "debug, info, warn or error (logs go to stderr)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if !config.ValidAgent(*agent) {
		fmt.Fprintf(stderr, "conch mcp: invalid agent id %q: use [a-z0-9][a-z0-9_-]{0,63}\n", *agent)
		return exitUsage
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "conch mcp: bad --log-level %q\n", *logLevel)
		return exitUsage
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
		return exitUsage
	}
	defer stopTracing()
	var srv *mcpserver.Server
	eng, err := engine.New(engine.Options{
		Home: *home, Workdir: *workdir, Mode: "mcp", Logger: log, Probes: waitprobe.Probes{},
		Notify: func(agent string, n engine.Notice) {
			if srv != nil {
				srv.Notify(agent, n)
			}
		},
	})
	var backend mcpserver.Engine = eng
	if errors.Is(err, engine.ErrHomeLocked) {
		// Another engine (conch serve) holds the home: proxy to it.
		cfg, cerr := config.Load(filepath.Join(*home, "config.json"))
		if cerr != nil {
			// The proxy needs the configuration too (the tool list).
			err = cerr
		} else {
			p := newSocketEngine(filepath.Join(*home, "run", "engine.sock"), *agent, *workdir, cfg)
			if p.ping() {
				log.Info("proxying to the engine that holds the home", "home", *home)
				backend, err = p, nil
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "conch mcp: %v\n", err)
		return exitFor(err, exitFailed)
	}
	if eng != nil {
		defer eng.Close()
		// As the engine of the home, serve its socket: the CLI and other
		// conch mcp processes reach this engine through it.
		if stopSock := serveEngineSocket(eng, log); stopSock != nil {
			defer stopSock()
		}
	}
	srv = mcpserver.New(backend, mcpserver.Options{Agent: *agent, Version: version(), Logger: log})

	go func() {
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
	}()
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
		return exitOK
	case <-sig:
	}
	proxy, _ := backend.(*socketEngine)
	stopMCP(eng, proxy, srv, stdio, sig, log)
	cancelRun()
	select {
	case <-runErr:
	case <-sig:
	}
	return exitOK
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

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "0.1.0-dev"
}

func commit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value[:min(12, len(s.Value))]
			}
		}
	}
	return "unknown"
}
