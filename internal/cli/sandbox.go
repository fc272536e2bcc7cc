package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/conchsh/conch/internal/admin"
	"github.com/spf13/cobra"
)

func (a *app) sandboxCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "sandbox",
		Short: "Sandbox backend and layers per agent; docker sandbox containers",
		Long: `Show the sandbox backend and protection layers of each agent and the docker
sandbox containers; recreate or prune containers. Reads the home's
configuration and asks docker directly, with or without a running engine.`,
		Example: "  conch sandbox status\n  conch sandbox recreate --agent build\n  conch sandbox prune",
	})
	for _, sub := range []struct{ use, short string }{
		{"status", "Sandbox backend, scope and layers per agent, and the containers"},
		{"list", "List the docker sandbox containers"},
		{"recreate (--agent A | --all)", "Remove an agent's (or every) sandbox container; it is recreated on next use"},
		{"prune", "Remove sandbox containers no agent uses"},
	} {
		name, _, _ := strings.Cut(sub.use, " ")
		c := &cobra.Command{Use: sub.use, Short: sub.short, Args: args()}
		home := homeFlag(c.Flags())
		asJSON := c.Flags().Bool("json", false, "print JSON")
		var agent *string
		var all *bool
		if name == "recreate" {
			agent = c.Flags().String("agent", "", "the agent whose sandbox to recreate")
			all = c.Flags().Bool("all", false, "every sandbox")
		} else {
			agent, all = new(string), new(bool)
		}
		c.RunE = a.runs(func(*cobra.Command, []string) int {
			return sandboxRun(name, *home, *asJSON, agent, all, a.stdout, a.stderr)
		})
		cmd.AddCommand(c)
	}
	return cmd
}

// sandboxRun runs `conch sandbox status|list|recreate|prune`.
func sandboxRun(sub, homeDir string, json_ bool, agent *string, all *bool, stdout, stderr io.Writer) int {
	home, asJSON := &homeDir, &json_
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := func(v any) {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(v)
	}
	// The kubernetes backend's sandboxes (sandbox_kube.go).
	if code, ok := runKubeSandbox(ctx, sub, *home, *agent, *all, *asJSON, stdout, stderr); ok {
		return code
	}
	switch sub {
	case "status", "list":
		st, err := admin.SandboxStatusOf(ctx, *home)
		if err != nil {
			fmt.Fprintf(stderr, "conch sandbox %s: %v\n", sub, err)
			return exitFor(err, ExitFailed)
		}
		if *asJSON {
			if sub == "list" {
				out(st.Containers)
			} else {
				out(st)
			}
			return ExitOK
		}
		if sub == "status" {
			for _, a := range st.Agents {
				switch {
				case !a.On:
					fmt.Fprintf(stdout, "%s: sandboxing off (mode %s)\n", a.Agent, a.Mode)
				case a.Error != "":
					fmt.Fprintf(stdout, "%s: UNAVAILABLE: %s\n", a.Agent, a.Error)
				default:
					fmt.Fprintf(stdout, "%s: backend %s, scope %s, workspace %s, network %s, layers %s\n", a.Agent, a.Backend, a.Scope, a.WorkspaceAccess, a.Network, strings.Join(a.Layers, ","))
					for _, g := range a.Gaps {
						fmt.Fprintf(stdout, "  not enforced: %s\n", g)
					}
				}
			}
			if st.LandlockABI > 0 {
				fmt.Fprintf(stdout, "landlock: ABI %d\n", st.LandlockABI)
			} else {
				fmt.Fprintln(stdout, "landlock: not offered by this kernel")
			}
		}
		if st.DockerError != "" {
			fmt.Fprintf(stdout, "docker: %s\n", st.DockerError)
			return ExitOK
		}
		if len(st.Containers) == 0 {
			fmt.Fprintln(stdout, "docker: no conch sandbox containers")
		}
		now := time.Now().UnixMilli()
		for _, c := range st.Containers {
			state := "stopped"
			if c.Running {
				state = "running"
			}
			fmt.Fprintf(stdout, "%s  scope %s  %s  age %s  config %.12s  (%s)\n", c.Name, c.Scope, state,
				(time.Duration(now-c.CreatedAt) * time.Millisecond).Round(time.Second), c.ConfigHash, c.Status)
		}
		return ExitOK
	case "recreate", "prune":
		var removed []string
		var err error
		if sub == "recreate" {
			if (*agent == "") == !*all {
				fmt.Fprintln(stderr, "conch sandbox recreate: give --agent A or --all")
				return ExitUsage
			}
			removed, err = admin.SandboxRecreate(ctx, *home, *agent, *all)
		} else {
			removed, err = admin.SandboxPrune(ctx, *home)
		}
		if err != nil {
			fmt.Fprintf(stderr, "conch sandbox %s: %v\n", sub, err)
			return exitFor(err, ExitUnavailable)
		}
		if *asJSON {
			out(map[string]any{"removed": removed})
		} else if len(removed) == 0 {
			fmt.Fprintln(stdout, "Nothing removed.")
		} else {
			fmt.Fprintf(stdout, "Removed %s (recreated on next use).\n", strings.Join(removed, ", "))
		}
		return ExitOK
	}
	return ExitUsage
}
