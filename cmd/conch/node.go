package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/conchsh/conch/client"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/atomicfile"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/nodehost"
	"github.com/conchsh/conch/internal/nodehub"
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

// runNode is `conch node`: a node host dialling out to a gateway
// (hosts.md §5).
func runNode(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := homeFlag(fs)
	gateway := fs.String("gateway", "", "gateway URL (https://host:7878; http:// only on trusted links)")
	token := fs.String("token", os.Getenv("CONCH_NODE_JOIN_TOKEN"), "join token cnj_… (first run) or node token (default $CONCH_NODE_JOIN_TOKEN)")
	podToken := fs.String("pod-token-file", os.Getenv("CONCH_NODE_POD_TOKEN_FILE"), "sandbox pods: the pod's projected service-account token, sent with the join token")
	name := fs.String("name", "", "node name (default: the host name)")
	ca := fs.String("ca", "", "PEM file: CA bundle, or the gateway's certificate (pinned)")
	logLevel := fs.String("log-level", envOr("CONCH_LOG", "info"), "debug, info, warn or error")
	followParent := exitWithParentFlag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "conch node: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "conch node: bad --log-level %q\n", *logLevel)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	stopTracing, ok := startTracing("node", stderr)
	if !ok {
		return exitUsage
	}
	defer stopTracing()
	if err := seedNodeConfig(*home); err != nil {
		fmt.Fprintf(stderr, "conch node: %v\n", err)
		return exitFailed
	}
	eng, err := engine.New(engine.Options{Home: *home, Mode: "node", Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "conch node: %v\n", err)
		return exitFor(err, exitFailed)
	}
	defer eng.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Watched once the stop signals are caught: the parent's end then
	// stops the node as SIGTERM does.
	if *followParent {
		if err := exitWithParent(); err != nil {
			fmt.Fprintf(stderr, "conch node: %v\n", err)
			return exitUnavailable
		}
	}
	err = nodehost.Run(ctx, nodehost.Options{
		Engine: eng, Home: eng.Home(), Gateway: *gateway, Token: *token, Name: *name, CA: *ca,
		Version: version(), Ping: nodePing(), Logger: log, Out: stdout, PodTokenFile: *podToken,
	})
	if err != nil {
		fmt.Fprintf(stderr, "conch node: %v\n", strings.TrimPrefix(err.Error(), "fatal: "))
		return exitFailed
	}
	return exitOK
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
	if err := atomicfile.Create(p, []byte(v)); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// runNodes is `conch nodes list|approve|rename|remove|invite`: through the
// gateway's engine socket when it runs (so a connected node gets its token
// or its disconnection at once), else on the home's files.
func runNodes(args []string, stdout, stderr io.Writer) int {
	const use = "usage: conch nodes list | invite [--ttl 24h] [--once] | approve ID | rename ID NAME | remove ID [--home DIR] [--json]"
	if len(args) == 0 {
		fmt.Fprintln(stderr, use)
		return exitUsage
	}
	fs := flag.NewFlagSet("nodes "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := homeFlag(fs)
	ttl := fs.Duration("ttl", 24*time.Hour, "invite: validity")
	once := fs.Bool("once", false, "invite: usable by one node only")
	asJSON := fs.Bool("json", false, "print JSON")
	sub := args[0]
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return exitUsage
	}
	want := map[string]int{"list": 0, "invite": 0, "approve": 1, "remove": 1, "rename": 2}
	n, ok := want[sub]
	if !ok || len(pos) != n {
		fmt.Fprintln(stderr, use)
		return exitUsage
	}
	api := socketAPI(*home)
	if api == nil {
		// No gateway: the same operations on the files.
		hub, err := nodehub.New(nodehub.Options{Home: *home})
		if err != nil {
			fmt.Fprintf(stderr, "conch nodes: %v\n", err)
			return exitFailed
		}
		api = func(method, path string, body any) (json.RawMessage, int, error) {
			return nodehub.LocalAPI(hub, method, path, body)
		}
	}
	fail := func(err error, status int) int {
		fmt.Fprintf(stderr, "conch nodes %s: %v\n", sub, err)
		switch status {
		case 404:
			return exitNotFound
		case 409:
			return exitConflict
		}
		return exitFailed
	}
	switch sub {
	case "list":
		b, st, err := api("GET", "/v1/nodes", nil)
		if err != nil {
			return fail(err, st)
		}
		if *asJSON {
			stdout.Write(b)
			fmt.Fprintln(stdout)
			return exitOK
		}
		var res struct{ Nodes []nodehub.Node }
		json.Unmarshal(b, &res)
		if len(res.Nodes) == 0 {
			fmt.Fprintln(stdout, "No nodes. Create an invite with: conch nodes invite")
			return exitOK
		}
		for _, n := range res.Nodes {
			fmt.Fprintf(stdout, "%s  %-9s  %-16s  %s/%s  %s\n", n.NodeID, n.Status, n.Name, n.Platform, n.Arch, n.RemoteIP)
		}
	case "invite":
		b, st, err := api("POST", "/v1/nodes/invites", map[string]any{"ttl": ttl.String(), "once": *once})
		if err != nil {
			return fail(err, st)
		}
		var res struct {
			Token       string
			ExpiresAtMs int64
		}
		json.Unmarshal(b, &res)
		if *asJSON {
			stdout.Write(b)
			fmt.Fprintln(stdout)
			return exitOK
		}
		fmt.Fprintf(stdout, "%s\n\nOn the node machine run:\n  conch node --gateway <URL> --token %s [--name NAME]\n(valid until %s)\n",
			res.Token, res.Token, time.UnixMilli(res.ExpiresAtMs).UTC().Format(time.RFC3339))
	case "approve":
		b, st, err := api("POST", "/v1/nodes/"+url.PathEscape(pos[0])+"/approve", nil)
		if err != nil {
			return fail(err, st)
		}
		var p nodehub.Paired
		json.Unmarshal(b, &p)
		fmt.Fprintf(stdout, "Approved node %s (%s).\n", p.NodeID, p.Name)
	case "remove":
		b, st, err := api("DELETE", "/v1/nodes/"+url.PathEscape(pos[0]), nil)
		if err != nil {
			return fail(err, st)
		}
		var r struct{ NodeID string }
		json.Unmarshal(b, &r)
		fmt.Fprintf(stdout, "Removed node %s.\n", r.NodeID)
	case "rename":
		b, st, err := api("PATCH", "/v1/nodes/"+url.PathEscape(pos[0]), map[string]string{"name": pos[1]})
		if err != nil {
			return fail(err, st)
		}
		var p nodehub.Paired
		json.Unmarshal(b, &p)
		fmt.Fprintf(stdout, "Renamed node %s to %s.\n", p.NodeID, p.Name)
	}
	return exitOK
}

// socketAPI returns a caller of the HTTP API on the home's engine socket
// (operator rights), or nil when no engine serves it.
func socketAPI(home string) func(method, path string, body any) (json.RawMessage, int, error) {
	sock := socketPath(home)
	if !socketAlive(sock) {
		return nil
	}
	c, err := client.New(client.Options{Socket: sock})
	if err != nil {
		return nil
	}
	return clientAPI(c)
}

// clientAPI adapts a client to the caller shape that nodehub.LocalAPI
// also has: the raw JSON answer, or the HTTP status and the API's message.
func clientAPI(c *client.Client) func(method, path string, body any) (json.RawMessage, int, error) {
	return func(method, path string, body any) (json.RawMessage, int, error) {
		p, rawQuery, _ := strings.Cut(path, "?")
		query, _ := url.ParseQuery(rawQuery)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out json.RawMessage
		err := c.Call(ctx, method, p, query, body, &out)
		if ae := (*client.Error)(nil); errors.As(err, &ae) {
			return nil, ae.Status, errors.New(ae.Message)
		}
		if err != nil {
			return nil, 0, err
		}
		return out, 200, nil
	}
}

// nodeApprovalsFile is `conch approvals get|set --node N`: the node's own
// approvals file, through the gateway (hosts.md §5.7).
func nodeApprovalsFile(sub, home, node string, rf *operatorRemote, pos []string, baseHash string, force bool, stdout, stderr io.Writer) int {
	api := socketAPI(home)
	if rf.gateway != "" {
		c, err := rf.client(home)
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals %s: %v\n", sub, err)
			return exitUsage
		}
		api = clientAPI(c)
	}
	if api == nil {
		fmt.Fprintf(stderr, "conch approvals %s --node: no gateway running on %s (start conch serve, or give --gateway)\n", sub, home)
		return exitUnavailable
	}
	path := "/v1/approvals-file?node=" + url.QueryEscape(node)
	fail := func(err error, status int) int {
		fmt.Fprintf(stderr, "conch approvals %s: %v\n", sub, err)
		switch status {
		case 404:
			return exitNotFound
		case 409:
			return exitConflict
		case 503:
			return exitUnavailable
		}
		return exitFailed
	}
	switch sub {
	case "get":
		b, st, err := api("GET", path, nil)
		if err != nil {
			return fail(err, st)
		}
		stdout.Write(b)
		if !bytes.HasSuffix(b, []byte("\n")) {
			fmt.Fprintln(stdout)
		}
		return exitOK
	case "set":
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "usage: conch approvals set FILE|- --node N (--base-hash H | --force)")
			return exitUsage
		}
		b, err := readFileOrStdin(pos[0])
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals set: %v\n", err)
			return exitFailed
		}
		if !json.Valid(b) {
			fmt.Fprintln(stderr, "conch approvals set: the file is not JSON")
			return exitUsage
		}
		if force {
			cur, st, err := api("GET", path, nil)
			if err != nil {
				return fail(err, st)
			}
			var c struct{ Hash string }
			json.Unmarshal(cur, &c)
			baseHash = c.Hash
		}
		out, st, err := api("PUT", path, map[string]any{"file": json.RawMessage(b), "baseHash": baseHash})
		if err != nil {
			return fail(err, st)
		}
		stdout.Write(out)
		return exitOK
	}
	fmt.Fprintln(stderr, "conch approvals: --node works with get and set only")
	return exitUsage
}
