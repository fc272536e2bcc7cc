package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// runAgentsClient is `conch agents add NAME [--workspace DIR] | list |
// remove NAME | token NAME --rotate` (interfaces.md §4). Agents live in
// the gateway, so these talk to --gateway or the home's engine socket
// only.
func runAgentsClient(args []string, stdout, stderr io.Writer) int {
	const synopsis = "agents add NAME [--workspace DIR] | list | remove NAME | token NAME --rotate"
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: conch %s\n", synopsis)
		return exitUsage
	}
	sub := args[0]
	fs := newFlagSet("agents "+sub, synopsis, stderr)
	g := addGlobalFlags(fs)
	workspace := fs.String("workspace", "", "add: the agent's default working directory")
	rotate := fs.Bool("rotate", false, "token: replace the agent's token")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	want := map[string]int{"add": 1, "list": 0, "remove": 1, "token": 1}
	n, ok := want[sub]
	if !ok || len(pos) != n {
		fmt.Fprintf(stderr, "usage: conch %s\n", synopsis)
		return exitUsage
	}
	if sub == "token" && !*rotate {
		fmt.Fprintln(stderr, "conch agents token: tokens are shown only once; pass --rotate to replace the agent's token")
		return exitUsage
	}
	c, err := g.remoteClient()
	if err != nil {
		fmt.Fprintf(stderr, "conch agents: %v\n", err)
		return exitUsage
	}
	if c == nil {
		fmt.Fprintln(stderr, "conch agents: no gateway running (start conch serve)")
		return exitUnavailable
	}
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "conch agents %s: %v\n", sub, err)
		return exitForError(err)
	}
	emit := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(stdout, "%s\n", b)
	}
	switch sub {
	case "add", "token":
		var tok struct{ Name, Token string }
		if sub == "add" {
			t, err := c.AddAgent(ctx, pos[0], *workspace)
			if err != nil {
				return fail(err)
			}
			tok.Name, tok.Token = t.Name, t.Token
		} else {
			t, err := c.RotateAgentToken(ctx, pos[0])
			if err != nil {
				return fail(err)
			}
			tok.Name, tok.Token = t.Name, t.Token
		}
		if tok.Name == "" {
			tok.Name = pos[0]
		}
		if g.json {
			emit(map[string]string{"name": tok.Name, "token": tok.Token})
			return exitOK
		}
		fmt.Fprintln(stdout, tok.Token)
		if sub == "add" {
			fmt.Fprintf(stderr, "Agent %s created; its token is shown only this once.\n", tok.Name)
		} else {
			fmt.Fprintf(stderr, "Agent %s has a new token (shown only this once); the old one no longer works.\n", tok.Name)
		}
	case "list":
		list, err := c.Agents(ctx)
		if err != nil {
			return fail(err)
		}
		if g.json {
			emit(map[string]any{"agents": list})
			return exitOK
		}
		if len(list) == 0 {
			fmt.Fprintln(stdout, "No agents.")
			return exitOK
		}
		width := 4
		for _, a := range list {
			width = max(width, len(a.Name))
		}
		for _, a := range list {
			ws := a.Workspace
			if ws == "" {
				ws = "-"
			}
			fmt.Fprintln(stdout, strings.TrimRight(fmt.Sprintf("%-*s %s", width, a.Name, ws), " "))
		}
	case "remove":
		if err := c.RemoveAgent(ctx, pos[0]); err != nil {
			return fail(err)
		}
		if g.json {
			emit(map[string]any{"name": pos[0], "removed": true})
			return exitOK
		}
		fmt.Fprintf(stdout, "Agent %s removed.\n", pos[0])
	}
	return exitOK
}
