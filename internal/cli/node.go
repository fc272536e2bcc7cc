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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/adapter/waitprobe"
	"github.com/conchsh/conch/internal/admin"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/node/agent"
	"github.com/conchsh/conch/internal/store/approvals"
)

// nodePing is the keepalive interval of both ends of a node connection:
// 30 s, or CONCH_NODE_PING_MS for tests and links that
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
	token := fs.String("token", os.Getenv("CONCH_NODE_JOIN_TOKEN"), "join token cnj_... (first run) or node token (default $CONCH_NODE_JOIN_TOKEN)")
	podToken := fs.String("pod-token-file", os.Getenv("CONCH_NODE_POD_TOKEN_FILE"), "sandbox pods: the pod's projected service-account token, sent with the join token")
	name := fs.String("name", "", "node name (default: the host name)")
	ca := fs.String("ca", "", "PEM file: CA bundle, or the gateway's certificate (pinned)")
	logLevel := fs.String("log-level", envOr("CONCH_LOG", "info"), "debug, info, warn or error")
	followParent := exitWithParentFlag(fs)
	cmd.RunE = a.runs(func(*cobra.Command, []string) int {
		return runNode(*home, *gateway, *token, *name, *ca, *podToken, *logLevel, *followParent, a.stdout, a.stderr)
	})
	return cmd
}

// runNode is `conch node`: a node host dialling out to a gateway.
func runNode(home, gateway, token, name, ca, podToken, logLevel string, followParent bool, stdout, stderr io.Writer) int {
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
	if err := seedNodeConfig(home); err != nil {
		fmt.Fprintf(stderr, "conch node: %v\n", err)
		return ExitFailed
	}
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
		if err := exitWithParent(stop); err != nil {
			fmt.Fprintf(stderr, "conch node: %v\n", err)
			return ExitUnavailable
		}
	}
	err = agent.Run(ctx, agent.Options{
		Engine: eng, ApplyPatch: engine.ApplyPatchLocal, SetApprovals: setApprovals,
		Home: eng.Home(), Gateway: gateway, Token: token, Name: name, CA: ca,
		Version: version(), Ping: nodePing(), Logger: log, Out: stdout, PodTokenFile: podToken,
	})
	if err != nil {
		fmt.Fprintf(stderr, "conch node: %v\n", strings.TrimPrefix(err.Error(), "fatal: "))
		return ExitFailed
	}
	return ExitOK
}

// setApprovals is the node host's system.execApprovals.set: the
// approvals-file use case of internal/admin, without an event stream (a
// node has none).
func setApprovals(home string, f *approvals.File, baseHash, by string) error {
	_, err := admin.SetApprovals(home, f, baseHash, by, nil)
	return err
}

// seedNodeConfig writes $CONCH_NODE_CONFIG_JSON as the home's config.json
// when the home has none: a sandbox pod of the kubernetes backend starts
// with an empty home and gets its node configuration this way.
func seedNodeConfig(home string) error {
	v := os.Getenv("CONCH_NODE_CONFIG_JSON")
	if v == "" {
		return nil
	}
	p := filepath.Join(home, "config.json")
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if _, err := config.Parse([]byte(v)); err != nil {
		return fmt.Errorf("CONCH_NODE_CONFIG_JSON: %v", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	if err := fsutil.CreateFile(p, []byte(v), 0o600); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}
