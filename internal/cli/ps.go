package cli

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/visible"
	"github.com/spf13/cobra"
)

func (a *app) psCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "ps [--all-agents]",
		Short:   "List sessions",
		Long:    "List the agent's running and recent sessions (the process tool's list), or every agent's.",
		Example: "  conch ps\n  conch ps --all-agents --json",
		Args:    args(),
	}
	g := addGlobalFlags(cmd.Flags())
	all := cmd.Flags().Bool("all-agents", false, "list every agent's sessions (operator)")
	cmd.RunE = a.runs(func(cmd *cobra.Command, _ []string) int {
		stdout, stderr := a.stdout, a.stderr
		be, err := g.connect()
		if err != nil {
			fmt.Fprintf(stderr, "conch ps: %v\n", err)
			return exitForError(err)
		}
		defer be.close()
		res, err := be.Sessions(context.Background(), client.SessionsOptions{AllAgents: *all})
		if err != nil {
			return printFailure("ps", g, res, err, stdout, stderr)
		}
		if g.json {
			printJSON(stdout, res)
			return ExitOK
		}
		if !*all {
			_, text := splitEvents(res.Text)
			printText(stdout, text)
			return ExitOK
		}
		var list client.SessionList
		if err := res.Decode(&list); err != nil {
			fmt.Fprintf(stderr, "conch ps: %v\n", err)
			return ExitFailed
		}
		printText(stdout, formatSessions(list.Sessions, g.agent))
		return ExitOK
	})
	return cmd
}

// formatSessions renders sessions of several agents, one line each, in
// the layout of process list with the agent in front.
// Entries without an agent belong to defaultAgent.
func formatSessions(list []client.Session, defaultAgent string) string {
	if len(list) == 0 {
		return "No running or recent sessions."
	}
	width := 5
	for _, s := range list {
		width = max(width, len(s.Agent))
	}
	var b strings.Builder
	for i, s := range list {
		if i > 0 {
			b.WriteByte('\n')
		}
		agent := s.Agent
		if agent == "" {
			agent = defaultAgent
		}
		label := middleTruncate(s.Command, 120)
		if s.Name != "" {
			label = middleTruncate(s.Name, 80)
		}
		l := visible.Line
		fmt.Fprintf(&b, "%-*s %s %-9s %s :: %s", width, l(agent), l(s.SessionID), l(s.Status), compactDuration(time.Duration(s.RuntimeMs)*time.Millisecond), l(label))
	}
	return b.String()
}

// compactDuration formats a runtime as process list does: 500ms, 45s,
// 2m5s, 1h30m, 2d3h; n/a when not positive.
func compactDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "n/a"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// middleTruncate shortens s to max code points around "...".
func middleTruncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	keep := (max - 3) / 2
	return string(r[:keep]) + "..." + string(r[len(r)-(max-3-keep):])
}
