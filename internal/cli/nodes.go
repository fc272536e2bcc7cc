package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/conchsh/conch/client"
	nodehub "github.com/conchsh/conch/internal/node/hub"
	"github.com/conchsh/conch/internal/term/visible"
	"github.com/spf13/cobra"
)

func (a *app) nodesCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "nodes",
		Short: "Pair and manage node hosts",
		Long: `Pair and manage node hosts: through the gateway's engine socket when it runs
(a connected node gets its token or its disconnection at once), else on the
home's files. Exit codes: 3 unknown node, 5 ambiguous or name taken.`,
		Example: `  conch nodes invite --ttl 1h --once
  conch nodes list
  conch nodes approve 3f2a
  conch nodes rename 3f2a buildbox`,
	})
	for _, sub := range []struct {
		use, short string
		args       []string
	}{
		{"list", "List paired nodes and pending requests", nil},
		{"invite [--ttl 24h] [--once]", "Create a join token for a new node", nil},
		{"approve ID", "Approve a node's pairing request", []string{"ID"}},
		{"rename ID NAME", "Rename a paired node", []string{"ID", "NAME"}},
		{"remove ID", "Reject a pending request or revoke a paired node", []string{"ID"}},
	} {
		name, _, _ := strings.Cut(sub.use, " ")
		c := &cobra.Command{Use: sub.use, Short: sub.short, Args: args(sub.args...)}
		home := homeFlag(c.Flags())
		asJSON := c.Flags().Bool("json", false, "print JSON")
		ttl, once := new(time.Duration), new(bool)
		if name == "invite" {
			ttl = c.Flags().Duration("ttl", 24*time.Hour, "validity")
			once = c.Flags().Bool("once", false, "usable by one node only")
		}
		c.RunE = a.runs(func(_ *cobra.Command, pos []string) int {
			return runNodes(name, pos, home, ttl, once, asJSON, a.stdout, a.stderr)
		})
		cmd.AddCommand(c)
	}
	return cmd
}

// runNodes is `conch nodes list|approve|rename|remove|invite`: through the
// gateway's engine socket when it runs (so a connected node gets its token
// or its disconnection at once), else on the home's files.
func runNodes(sub string, pos []string, home *string, ttl *time.Duration, once, asJSON *bool, stdout, stderr io.Writer) int {
	var api nodesAPI
	if call := socketAPI(*home); call != nil {
		api = remoteNodes{call}
	} else {
		// No gateway: the same operations on the files.
		hub, err := nodehub.New(nodehub.Options{Home: *home})
		if err != nil {
			fmt.Fprintf(stderr, "conch nodes: %v\n", err)
			return ExitFailed
		}
		api = localNodes{hub}
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "conch nodes %s: %v\n", sub, err)
		return nodesExit(err)
	}
	switch sub {
	case "list":
		b, err := api.list()
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			stdout.Write(b)
			fmt.Fprintln(stdout)
			return ExitOK
		}
		var res struct{ Nodes []nodehub.Node }
		json.Unmarshal(b, &res)
		if len(res.Nodes) == 0 {
			fmt.Fprintln(stdout, "No nodes. Create an invite with: conch nodes invite")
			return ExitOK
		}
		for _, n := range res.Nodes {
			l := visible.Line // a node chose its name, platform and arch
			fmt.Fprintf(stdout, "%s  %-9s  %-16s  %s/%s  %s\n", l(n.NodeID), l(n.Status), l(n.Name), l(n.Platform), l(n.Arch), l(n.RemoteIP))
		}
	case "invite":
		b, err := api.invite(*ttl, *once)
		if err != nil {
			return fail(err)
		}
		var res struct {
			Token       string
			ExpiresAtMs int64
		}
		json.Unmarshal(b, &res)
		if *asJSON {
			stdout.Write(b)
			fmt.Fprintln(stdout)
			return ExitOK
		}
		fmt.Fprintf(stdout, "%s\n\nOn the node machine run:\n  conch node --gateway <URL> --token %s [--name NAME]\n(valid until %s)\n",
			res.Token, res.Token, time.UnixMilli(res.ExpiresAtMs).UTC().Format(time.RFC3339))
	case "approve":
		b, err := api.approve(pos[0])
		if err != nil {
			return fail(err)
		}
		var p nodehub.Paired
		json.Unmarshal(b, &p)
		fmt.Fprintf(stdout, "Approved node %s (%s).\n", p.NodeID, p.Name)
	case "remove":
		b, err := api.remove(pos[0])
		if err != nil {
			return fail(err)
		}
		var r struct{ NodeID string }
		json.Unmarshal(b, &r)
		fmt.Fprintf(stdout, "Removed node %s.\n", r.NodeID)
	case "rename":
		b, err := api.rename(pos[0], pos[1])
		if err != nil {
			return fail(err)
		}
		var p nodehub.Paired
		json.Unmarshal(b, &p)
		fmt.Fprintf(stdout, "Renamed node %s to %s.\n", p.NodeID, p.Name)
	}
	return ExitOK
}

// nodesAPI is where `conch nodes` runs its operations: the gateway's API
// over the home's engine socket (remoteNodes), or the hub on the home's
// files when no gateway runs (localNodes). Each answers the JSON of the
// API's route; nodesExit maps a failure to the exit code.
type nodesAPI interface {
	list() (json.RawMessage, error)
	invite(ttl time.Duration, once bool) (json.RawMessage, error)
	approve(q string) (json.RawMessage, error)
	rename(q, name string) (json.RawMessage, error)
	remove(q string) (json.RawMessage, error)
}

// remoteNodes runs the operations through the gateway's /v1/nodes routes.
type remoteNodes struct {
	call func(method, path string, body any) (json.RawMessage, int, error)
}

// apiError is a failed API call: the HTTP status and the API's message.
type apiError struct {
	status int
	err    error
}

func (e *apiError) Error() string { return e.err.Error() }

func (r remoteNodes) do(method, path string, body any) (json.RawMessage, error) {
	b, status, err := r.call(method, path, body)
	if err != nil {
		return nil, &apiError{status, err}
	}
	return b, nil
}

func (r remoteNodes) list() (json.RawMessage, error) { return r.do("GET", "/v1/nodes", nil) }
func (r remoteNodes) invite(ttl time.Duration, once bool) (json.RawMessage, error) {
	return r.do("POST", "/v1/nodes/invites", map[string]any{"ttl": ttl.String(), "once": once})
}
func (r remoteNodes) approve(q string) (json.RawMessage, error) {
	return r.do("POST", "/v1/nodes/"+url.PathEscape(q)+"/approve", nil)
}
func (r remoteNodes) rename(q, name string) (json.RawMessage, error) {
	return r.do("PATCH", "/v1/nodes/"+url.PathEscape(q), map[string]string{"name": name})
}
func (r remoteNodes) remove(q string) (json.RawMessage, error) {
	return r.do("DELETE", "/v1/nodes/"+url.PathEscape(q), nil)
}

// localNodes runs the operations on the hub of the home's files, with
// the answers the routes give.
type localNodes struct{ hub *nodehub.Hub }

func answer(v any, err error) (json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func (l localNodes) list() (json.RawMessage, error) { return answer(l.hub.Overview()) }
func (l localNodes) invite(ttl time.Duration, once bool) (json.RawMessage, error) {
	return answer(l.hub.Invite(ttl, once))
}
func (l localNodes) approve(q string) (json.RawMessage, error) {
	p, err := l.hub.Approve(q)
	p.TokenHash = ""
	return answer(p, err)
}
func (l localNodes) rename(q, name string) (json.RawMessage, error) {
	p, err := l.hub.Rename(q, name)
	p.TokenHash = ""
	return answer(p, err)
}
func (l localNodes) remove(q string) (json.RawMessage, error) {
	id, err := l.hub.Remove(q)
	return answer(map[string]string{"nodeId": id}, err)
}

// nodesExit is the exit code of a failed `conch nodes` operation.
func nodesExit(err error) int {
	var ae *apiError
	status := 0
	if errors.As(err, &ae) {
		status = ae.status
	}
	switch {
	case status == 404, errors.Is(err, nodehub.ErrNotFound):
		return ExitNotFound
	case status == 409, errors.Is(err, nodehub.ErrAmbiguous), errors.Is(err, nodehub.ErrNameTaken):
		return ExitConflict
	}
	return ExitFailed
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

// clientAPI adapts a client to a caller of the API's routes: the raw JSON
// answer, or the HTTP status and the API's message.
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
// approvals file, through the gateway.
func (a *app) nodeApprovalsFile(sub string, o *opFlags, node string, pos []string, baseHash string, force bool) int {
	home, stdout, stderr := o.home, a.stdout, a.stderr
	api := socketAPI(home)
	if o.gateway != "" {
		c, err := o.client()
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals %s: %v\n", sub, err)
			return ExitUsage
		}
		api = clientAPI(c)
	}
	if api == nil {
		fmt.Fprintf(stderr, "conch approvals %s --node: no gateway running on %s (start conch serve, or give --gateway)\n", sub, home)
		return ExitUnavailable
	}
	path := "/v1/approvals-file?node=" + url.QueryEscape(node)
	fail := func(err error, status int) int {
		fmt.Fprintf(stderr, "conch approvals %s: %v\n", sub, err)
		switch status {
		case 404:
			return ExitNotFound
		case 409:
			return ExitConflict
		case 503:
			return ExitUnavailable
		}
		return ExitFailed
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
		return ExitOK
	case "set":
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "usage: conch approvals set FILE|- --node N (--base-hash H | --force)")
			return ExitUsage
		}
		b, err := readFileOrStdin(pos[0], a.stdin)
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals set: %v\n", err)
			return ExitFailed
		}
		if !json.Valid(b) {
			fmt.Fprintln(stderr, "conch approvals set: the file is not JSON")
			return ExitUsage
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
		return ExitOK
	}
	fmt.Fprintln(stderr, "conch approvals: --node works with get and set only")
	return ExitUsage
}
