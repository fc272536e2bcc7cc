package cli

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/term/visible"
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
		var list client.SessionList
		if err := res.Decode(&list); err != nil {
			fmt.Fprintf(stderr, "conch ps: %v\n", err)
			return ExitFailed
		}
		printText(stdout, formatSessions(list.Sessions, g.agent, *all))
		return ExitOK
	})
	return cmd
}

// formatSessions renders sessions as a table under a header line:
// session, status, runtime and name (process list's label), with the
// owning agent in front when agents is set. Entries without an agent
// belong to defaultAgent.
func formatSessions(list []client.Session, defaultAgent string, agents bool) string {
	if len(list) == 0 {
		return "No running or recent sessions."
	}
	type row struct{ agent, id, status, time, label string }
	rows := []row{{"AGENT", "SESSION", "STATUS", "TIME", "NAME"}}
	for _, s := range list {
		agent := s.Agent
		if agent == "" {
			agent = defaultAgent
		}
		label := middleTruncate(s.Command, 120)
		if s.Name != "" {
			label = middleTruncate(s.Name, 80)
		}
		if s.AwaitingInput != nil {
			label += " [awaiting input]"
		}
		l := visible.Line // a name or a command stays on its row
		rows = append(rows, row{l(agent), l(s.SessionID), l(s.Status), compactDuration(time.Duration(s.RuntimeMs) * time.Millisecond), l(label)})
	}
	wa, wi, wt := 5, 0, 0
	for _, r := range rows {
		wa, wi, wt = max(wa, len(r.agent)), max(wi, len(r.id)), max(wt, len(r.time))
	}
	var b strings.Builder
	for i, r := range rows {
		if i > 0 {
			b.WriteByte('\n')
		}
		if agents {
			fmt.Fprintf(&b, "%-*s ", wa, r.agent)
		}
		fmt.Fprintf(&b, "%-*s %-9s %-*s %s", wi, r.id, r.status, wt, r.time, r.label)
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
