package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) agentsCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "agents",
		Short: "Manage the gateway's agents, their tokens and exec defaults",
		Long: `Manage the agents of a running gateway (add, list, remove, token: through
--gateway or the home's engine socket) and an agent's exec defaults (defaults:
on the home's files).`,
		Example: `  conch agents add build --workspace ~/src/app
  conch agents list
  conch agents token build --rotate
  conch agents defaults main host=sandbox ask=on-miss`,
	})
	for _, sub := range []struct{ use, short string }{
		{"add NAME [--workspace DIR]", "Create an agent and print its token (shown once)"},
		{"list", "List the gateway's agents"},
		{"remove NAME", "Remove an agent and revoke its token"},
		{"token NAME --rotate", "Replace an agent's token and print the new one"},
	} {
		cmd.AddCommand(a.agentsSubCmd(sub.use, sub.short))
	}
	cmd.AddCommand(a.agentsDefaultsCmd())
	return cmd
}

func (a *app) agentsSubCmd(use, short string) *cobra.Command {
	name, _, _ := strings.Cut(use, " ")
	want := []string{"NAME"}
	if name == "list" {
		want = nil
	}
	cmd := &cobra.Command{Use: use, Short: short, Args: args(want...)}
	g := addGlobalFlags(cmd.Flags())
	var workspace *string
	var rotate *bool
	switch name {
	case "add":
		workspace = cmd.Flags().String("workspace", "", "the agent's default working directory")
	case "token":
		rotate = cmd.Flags().Bool("rotate", false, "replace the agent's token (required: tokens are shown only once)")
	}
	cmd.RunE = a.runs(func(cmd *cobra.Command, pos []string) int {
		ws := ""
		if workspace != nil {
			ws = *workspace
		}
		return a.agentsClient(g, name, pos, ws, rotate != nil && *rotate)
	})
	return cmd
}

// agentsClient runs `conch agents add|list|remove|token`. Agents live in
// the gateway, so these talk to --gateway or the home's engine socket
// only.
func (a *app) agentsClient(g *globalFlags, sub string, pos []string, workspace string, rotate bool) int {
	stdout, stderr := a.stdout, a.stderr
	if sub == "token" && !rotate {
		fmt.Fprintln(stderr, "conch agents token: tokens are shown only once; pass --rotate to replace the agent's token")
		return ExitUsage
	}
	c, err := g.remoteClient()
	if err != nil {
		fmt.Fprintf(stderr, "conch agents: %v\n", err)
		return ExitUsage
	}
	if c == nil {
		fmt.Fprintln(stderr, "conch agents: no gateway running (start conch serve)")
		return ExitUnavailable
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
			t, err := c.AddAgent(ctx, pos[0], workspace)
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
			return ExitOK
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
			return ExitOK
		}
		if len(list) == 0 {
			fmt.Fprintln(stdout, "No agents.")
			return ExitOK
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
			return ExitOK
		}
		fmt.Fprintf(stdout, "Agent %s removed.\n", pos[0])
	}
	return ExitOK
}
