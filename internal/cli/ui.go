package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) uiCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ui [--print]",
		Short: "Print a one-time login link for the control UI of conch serve",
		Long: `Ask the running conch serve (through --gateway or the home's engine socket) for
a one-time login link to its control UI: valid 5 minutes, one sign-in.`,
		Example: "  conch ui\n  xdg-open \"$(conch ui --print)\"",
		Args:    args(),
	}
	g := addGlobalFlags(cmd.Flags())
	printOnly := cmd.Flags().Bool("print", false, "print only the link (for scripts)")
	cmd.RunE = a.runs(func(*cobra.Command, []string) int {
		return a.uiLink(g, *printOnly)
	})
	return cmd
}

func (a *app) uiLink(g *globalFlags, printOnly bool) int {
	stdout, stderr := a.stdout, a.stderr
	c, err := g.remoteClient()
	if err != nil {
		fmt.Fprintf(stderr, "conch ui: %v\n", err)
		return ExitUsage
	}
	if c == nil {
		fmt.Fprintln(stderr, "conch ui: no gateway running (start conch serve)")
		return ExitUnavailable
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lc, err := c.UILoginCode(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "conch ui: %v\n", err)
		return exitForError(err)
	}
	if printOnly {
		fmt.Fprintln(stdout, lc.URL)
		return ExitOK
	}
	fmt.Fprintf(stdout, "Open this link to sign in to the control UI (single use, valid until %s):\n\n  %s\n",
		time.UnixMilli(lc.ExpiresAtMs).Format("15:04:05"), lc.URL)
	return ExitOK
}
