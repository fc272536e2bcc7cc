package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/conchsh/conch/engine"
)

// runSandbox implements `conch sandbox status|list|recreate|prune`
// (interfaces.md §5). It reads the home's configuration and asks docker
// directly, so it works with or without a running engine.
func runSandbox(args []string, stdout, stderr io.Writer) int {
	const synopsis = "usage: conch sandbox status | list | recreate (--agent A | --all) | prune [--home DIR] [--json]"
	if len(args) == 0 {
		fmt.Fprintln(stderr, synopsis)
		return exitUsage
	}
	sub := args[0]
	fs := flag.NewFlagSet("sandbox "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := homeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	agent := fs.String("agent", "", "recreate: the agent whose sandbox to recreate")
	all := fs.Bool("all", false, "recreate: every sandbox")
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := func(v any) {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(v)
	}
	// The kubernetes backend's sandboxes (sandboxcmd_kube.go).
	if code, ok := runKubeSandbox(ctx, sub, *home, *agent, *all, *asJSON, stdout, stderr); ok {
		return code
	}
	switch sub {
	case "status", "list":
		st, err := engine.SandboxStatusOf(ctx, *home)
		if err != nil {
			fmt.Fprintf(stderr, "conch sandbox %s: %v\n", sub, err)
			return exitFor(err, exitFailed)
		}
		if *asJSON {
			if sub == "list" {
				out(st.Containers)
			} else {
				out(st)
			}
			return exitOK
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
			return exitOK
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
		return exitOK
	case "recreate", "prune":
		var removed []string
		var err error
		if sub == "recreate" {
			if (*agent == "") == !*all {
				fmt.Fprintln(stderr, "conch sandbox recreate: give --agent A or --all")
				return exitUsage
			}
			removed, err = engine.SandboxRecreate(ctx, *home, *agent, *all)
		} else {
			removed, err = engine.SandboxPrune(ctx, *home)
		}
		if err != nil {
			fmt.Fprintf(stderr, "conch sandbox %s: %v\n", sub, err)
			return exitFor(err, exitUnavailable)
		}
		if *asJSON {
			out(map[string]any{"removed": removed})
		} else if len(removed) == 0 {
			fmt.Fprintln(stdout, "Nothing removed.")
		} else {
			fmt.Fprintf(stdout, "Removed %s (recreated on next use).\n", strings.Join(removed, ", "))
		}
		return exitOK
	}
	fmt.Fprintln(stderr, synopsis)
	return exitUsage
}
