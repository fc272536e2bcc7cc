package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/node/hub"
	"github.com/conchsh/conch/policy"
	"github.com/spf13/cobra"
)

func (a *app) agentsDefaultsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "defaults NAME [host=... security=... ask=... node=...] [--clear]",
		Short: "Show or set an agent's exec defaults (host, security, ask, node)",
		Example: `  conch agents defaults main
  conch agents defaults main host=sandbox security=allowlist ask=on-miss
  conch agents defaults main --clear`,
		Args: cobra.MinimumNArgs(1),
	}
	home := homeFlag(cmd.Flags())
	clear := cmd.Flags().Bool("clear", false, "remove the agent's exec defaults")
	cmd.RunE = a.runs(func(_ *cobra.Command, pos []string) int {
		return execDefaults(*home, pos[0], pos[1:], *clear, a.stdout, a.stderr)
	})
	return cmd
}

// execDefaults is `conch agents defaults NAME [k=v...] [--clear]`.
func execDefaults(home, name string, kvs []string, clear bool, stdout, stderr io.Writer) int {
	cur, err := engine.LoadExecDefaults(home, name)
	if err != nil {
		fmt.Fprintf(stderr, "conch agents defaults: %v\n", err)
		return ExitFailed
	}
	show := func(v string) string {
		if v == "" {
			return "(unset)"
		}
		return v
	}
	if clear {
		if err := engine.SaveExecDefaults(home, name, apitype.ExecDefaults{}, true); err != nil {
			fmt.Fprintf(stderr, "conch agents defaults: %v\n", err)
			return ExitFailed
		}
		fmt.Fprintln(stdout, "Exec defaults cleared.")
		return ExitOK
	}
	if len(kvs) == 0 {
		fmt.Fprintf(stdout, "Current exec defaults: host=%s, security=%s, ask=%s, node=%s.\n", show(cur.Host), show(cur.Security), show(cur.Ask), show(cur.Node))
		fmt.Fprintln(stdout, "Options: host=sandbox|gateway|node, security=deny|allowlist|full, ask=off|on-miss|always, node=<id>|<name>|<ip>.")
		return ExitOK
	}
	var set []string
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			k, v, _ = strings.Cut(kv, ":")
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		lv := strings.ToLower(v)
		switch k {
		case "host":
			if !policyOneOf(lv, config.HostValues()...) {
				fmt.Fprintf(stderr, "Unrecognized exec host %q. Valid hosts: %s.\n", v, strings.Join(config.HostValues(), ", "))
				return ExitUsage
			}
			cur.Host = lv
		case "security":
			if !policy.Security(lv).Valid() {
				fmt.Fprintf(stderr, "Unrecognized exec security %q. Valid: deny, allowlist, full.\n", v)
				return ExitUsage
			}
			cur.Security = lv
		case "ask":
			if !policy.Ask(lv).Valid() {
				fmt.Fprintf(stderr, "Unrecognized exec ask %q. Valid: off, on-miss, always.\n", v)
				return ExitUsage
			}
			cur.Ask = lv
		case "node":
			if v == "" {
				fmt.Fprintln(stderr, "Exec node requires a value.")
				return ExitUsage
			}
			n, err := hub.CanonicalBinding(home, v)
			if err != nil {
				fmt.Fprintf(stderr, "Invalid exec node: %v\n", err)
				return ExitUsage
			}
			cur.Node, lv = n, n
		default:
			fmt.Fprintf(stderr, "conch agents defaults: unknown key %q\n", k)
			return ExitUsage
		}
		set = append(set, k+"="+lv)
	}
	if err := engine.SaveExecDefaults(home, name, cur, false); err != nil {
		fmt.Fprintf(stderr, "conch agents defaults: %v\n", err)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "Exec defaults set (%s).\n", strings.Join(set, ", "))
	return ExitOK
}

func policyOneOf(v string, allowed ...string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}
