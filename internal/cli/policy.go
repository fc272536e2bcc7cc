package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) policyCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "policy",
		Short: "Show how the policy judges a command",
	})
	explain := &cobra.Command{
		Use:   "explain [--agent A] [--cwd DIR] [--json] -- CMD",
		Short: "Show whether the gate applies to an agent and how the policy judges a command",
		Example: `  conch policy explain -- 'rm -rf build'
  conch policy explain --agent build --json -- git push`,
	}
	stopAtFirstArg(explain)
	fs := explain.Flags()
	o := addOpFlags(fs)
	agent := fs.String("agent", envOr("CONCH_AGENT", "main"), "agent")
	cwd := fs.String("cwd", "", "working directory (default: current)")
	host := fs.String("host", "gateway", "host (gateway)")
	asJSON := fs.Bool("json", false, "print JSON")
	explain.RunE = a.runs(func(_ *cobra.Command, pos []string) int {
		command := strings.Join(pos, " ")
		if strings.TrimSpace(command) == "" {
			fmt.Fprintln(a.stderr, "conch policy explain: no command (put it after --)")
			return ExitUsage
		}
		if *cwd == "" {
			*cwd, _ = os.Getwd()
		}
		src, err := o.source()
		if err == nil {
			var text string
			var js any
			if text, js, err = src.explain(context.Background(), *agent, *host, *cwd, command); err == nil {
				if *asJSON {
					json.NewEncoder(a.stdout).Encode(js)
				} else {
					fmt.Fprint(a.stdout, text)
				}
				return ExitOK
			}
		}
		fmt.Fprintf(a.stderr, "conch policy explain: %v\n", err)
		return exitForOp(err, ExitUnavailable)
	})
	cmd.AddCommand(explain)
	return cmd
}
