package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/nodehost"
	"github.com/conchsh/conch/internal/waitprobe"
)

// nodePing is the keepalive interval of both ends of a node connection:
// 30 s (hosts.md §5.1), or CONCH_NODE_PING_MS for tests and links that
// need faster failure detection.
func nodePing() time.Duration {
	if v, err := strconv.Atoi(os.Getenv("CONCH_NODE_PING_MS")); err == nil && v > 0 {
		return time.Duration(v) * time.Millisecond
	}
	return 30 * time.Second
}

func (a *app) nodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node --gateway URL --token T [--name N] [--ca FILE]",
		Short: "Run a node host that dials out to a gateway",
		Long: `Run a node host: it dials out to a gateway and runs the commands the gateway's
agents send to it. The first run pairs with a join token (conch nodes invite on
the gateway); later runs need neither flag (the URL and node token are in
node/node.json in the home).`,
		Example: `  conch node --gateway https://gw.example:7878 --token cnj_... --name buildbox
  conch node                                  # later runs`,
		Args: args(),
	}
	fs := cmd.Flags()
	home := homeFlag(fs)
	gateway := fs.String("gateway", "", "gateway URL (https://host:7878; http:// only on trusted links)")
	token := fs.String("token", "", "join token cnj_... (first run) or node token")
	name := fs.String("name", "", "node name (default: the host name)")
	ca := fs.String("ca", "", "PEM file: CA bundle, or the gateway's certificate (pinned)")
	logLevel := fs.String("log-level", envOr("CONCH_LOG", "info"), "debug, info, warn or error")
	followParent := exitWithParentFlag(fs)
	cmd.RunE = a.runs(func(*cobra.Command, []string) int {
		return runNode(*home, *gateway, *token, *name, *ca, *logLevel, *followParent, a.stdout, a.stderr)
	})
	return cmd
}

// runNode is `conch node`: a node host dialling out to a gateway.
func runNode(home, gateway, token, name, ca, logLevel string, followParent bool, stdout, stderr io.Writer) int {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(stderr, "conch node: bad --log-level %q\n", logLevel)
		return ExitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	stopTracing, ok := startTracing("node", stderr)
	if !ok {
		return ExitUsage
	}
	defer stopTracing()
	eng, err := engine.New(engine.Options{Home: home, Mode: "node", Logger: log, Probes: waitprobe.Probes{}})
	if err != nil {
		fmt.Fprintf(stderr, "conch node: %v\n", err)
		return exitFor(err, ExitFailed)
	}
	defer eng.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Watched once the stop signals are caught: the parent's end then
	// stops the node as SIGTERM does.
	if followParent {
		if err := exitWithParent(); err != nil {
			fmt.Fprintf(stderr, "conch node: %v\n", err)
			return ExitUnavailable
		}
	}
	err = nodehost.Run(ctx, nodehost.Options{
		Engine: eng, ApplyPatch: engine.ApplyPatchLocal, RecordPolicyChange: engine.RecordPolicyChange,
		Home: eng.Home(), Gateway: gateway, Token: token, Name: name, CA: ca,
		Version: version(), Ping: nodePing(), Logger: log, Out: stdout,
	})
	if err != nil {
		fmt.Fprintf(stderr, "conch node: %v\n", strings.TrimPrefix(err.Error(), "fatal: "))
		return ExitFailed
	}
	return ExitOK
}
