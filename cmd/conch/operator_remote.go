package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/approvals"
	"github.com/conchsh/conch/internal/ledger"
)

// The operator commands (approvals, policy explain, ledger) work on the
// home's files by default. With --gateway (or CONCH_GATEWAY) they use a
// running gateway's /v1 API instead, with the operator token.

type operatorRemote struct {
	gateway, token string
}

func remoteFlags(fs *flag.FlagSet) *operatorRemote {
	r := &operatorRemote{}
	fs.StringVar(&r.gateway, "gateway", os.Getenv("CONCH_GATEWAY"), "gateway URL: use its API instead of the home's files (env CONCH_GATEWAY)")
	fs.StringVar(&r.token, "token", "", "operator token for --gateway (env CONCH_TOKEN; default: HOME/operator.token)")
	return r
}

func (r *operatorRemote) client(home string) (*client.Client, error) {
	tok := gatewayToken(r.token, home)
	if tok == "" {
		return nil, fmt.Errorf("--gateway needs an operator token (--token, CONCH_TOKEN or %s/operator.token)", home)
	}
	return client.New(client.Options{Gateway: r.gateway, Token: tok})
}

func remoteCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func approvalsRemote(c *client.Client, sub string, pos []string, always, asJSON bool, baseHash string, force bool, stdout, stderr io.Writer) int {
	ctx, cancel := remoteCtx()
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "conch approvals: %v\n", err)
		return exitForError(err)
	}
	switch sub {
	case "pending":
		var out struct {
			Approvals []*approvals.Request `json:"approvals"`
		}
		if err := c.Call(ctx, "GET", "/v1/approvals", nil, nil, &out); err != nil {
			return fail(err)
		}
		if asJSON {
			json.NewEncoder(stdout).Encode(out.Approvals)
			return exitOK
		}
		printPending(stdout, out.Approvals)
		return exitOK
	case "approve", "deny", "decide":
		want := 1
		if sub == "decide" {
			want = 2
		}
		if len(pos) != want {
			fmt.Fprintf(stderr, "usage: conch approvals %s ID%s\n", sub, map[bool]string{true: " DECISION", false: ""}[sub == "decide"])
			return exitUsage
		}
		decision := "allow-once"
		switch {
		case sub == "approve" && always:
			decision = "allow-always"
		case sub == "deny":
			decision = "deny"
		case sub == "decide":
			decision = pos[1]
		}
		var out struct {
			Decision  string `json:"decision"`
			SessionID string `json:"sessionId"`
		}
		if err := c.Call(ctx, "POST", "/v1/approvals/"+url.PathEscape(pos[0])+"/decision", nil, map[string]string{"decision": decision}, &out); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "Approval %s: %s (session %s).\n", pos[0], out.Decision, out.SessionID)
		return exitOK
	case "get":
		var out json.RawMessage
		if err := c.Call(ctx, "GET", "/v1/approvals-file", nil, nil, &out); err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, string(out))
		return exitOK
	case "set":
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "usage: conch approvals set FILE|- --base-hash H | --force")
			return exitUsage
		}
		b, err := readFileOrStdin(pos[0])
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals set: %v\n", err)
			return exitFailed
		}
		if force {
			var cur struct {
				Hash string `json:"hash"`
			}
			if err := c.Call(ctx, "GET", "/v1/approvals-file", nil, nil, &cur); err != nil {
				return fail(err)
			}
			baseHash = cur.Hash
		}
		if baseHash == "" {
			fmt.Fprintln(stderr, "conch approvals set: --base-hash (from `conch approvals get`) or --force is required")
			return exitUsage
		}
		var out struct {
			Hash string `json:"hash"`
		}
		if err := c.Call(ctx, "PUT", "/v1/approvals-file", nil, map[string]any{"file": json.RawMessage(b), "baseHash": baseHash}, &out); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "{\"hash\":%q}\n", out.Hash)
		return exitOK
	}
	fmt.Fprintf(stderr, "conch approvals: %q does not work with --gateway (pending, approve, deny, decide, get, set do)\n", sub)
	return exitUsage
}

func ledgerRemote(c *client.Client, sub string, n int, f ledger.Filter, follow, asJSON, allowGaps bool, stdout, stderr io.Writer) int {
	ctx, cancel := remoteCtx()
	defer cancel()
	switch sub {
	case "verify":
		var rep ledger.Report
		if err := c.Call(ctx, "POST", "/v1/ledger/verify", nil, map[string]any{}, &rep); err != nil {
			fmt.Fprintf(stderr, "conch ledger verify: %v\n", err)
			return exitForError(err)
		}
		return printVerify(rep, asJSON, allowGaps, stdout)
	case "tail":
		return ledgerTail(func(n int, f ledger.Filter) ([]ledger.Record, error) {
			q := url.Values{"limit": {strconv.Itoa(n)}}
			if f.Since > 0 {
				q.Set("since", strconv.FormatInt(f.Since, 10))
			}
			for k, v := range map[string]string{"session": f.Session, "approval": f.Approval, "agent": f.Agent} {
				if v != "" {
					q.Set(k, v)
				}
			}
			var out struct {
				Records []ledger.Record `json:"records"`
			}
			ctx, cancel := remoteCtx()
			defer cancel()
			err := c.Call(ctx, "GET", "/v1/ledger", q, nil, &out)
			return out.Records, err
		}, n, f, follow, asJSON, stdout, stderr)
	}
	fmt.Fprintf(stderr, "conch ledger: unknown subcommand %q\n", sub)
	return exitUsage
}

// readFileOrStdin reads a named file, or standard input for "-".
func readFileOrStdin(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

// ledgerTail prints the last n records that match f, then, with follow,
// every new one as it is appended until SIGINT or SIGTERM. fetch returns
// the last n records matching a filter (Since: only later seqs).
func ledgerTail(fetch func(n int, f ledger.Filter) ([]ledger.Record, error), n int, f ledger.Filter, follow, asJSON bool, stdout, stderr io.Writer) int {
	print := func(recs []ledger.Record) {
		for _, r := range recs {
			if asJSON {
				b, _ := json.Marshal(r)
				fmt.Fprintln(stdout, string(b))
			} else {
				fmt.Fprintln(stdout, r.String())
			}
			f.Since = max(f.Since, r.Seq)
		}
	}
	recs, err := fetch(n, f)
	if err != nil {
		fmt.Fprintf(stderr, "conch ledger tail: %v\n", err)
		return exitForError(err)
	}
	print(recs)
	if !follow {
		return exitOK
	}
	if f.Since == 0 {
		// Nothing matched yet: start after the current end.
		all, err := fetch(1, ledger.Filter{})
		if err == nil && len(all) > 0 {
			f.Since = all[len(all)-1].Seq
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
		}
		recs, err := fetch(100000, f)
		if err != nil {
			fmt.Fprintf(stderr, "conch ledger tail: %v\n", err)
			continue // a gateway restart or a moment without the file
		}
		print(recs)
	}
}

// printVerify prints a ledger verification report; a broken ledger exits 1.
// printVerify prints a verify report and returns its exit code: 1 for a
// broken ledger, and for gap records unless allowGaps.
func printVerify(rep ledger.Report, asJSON, allowGaps bool, stdout io.Writer) int {
	if asJSON {
		json.NewEncoder(stdout).Encode(rep)
	} else {
		fmt.Fprintln(stdout, rep.String())
		for _, line := range rep.Details() {
			fmt.Fprintln(stdout, line)
		}
	}
	if !rep.OK || len(rep.Gaps) > 0 && !allowGaps {
		return exitFailed
	}
	return exitOK
}
