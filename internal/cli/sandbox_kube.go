package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/kube"
)

// runKubeSandbox runs `conch sandbox list|recreate|prune` for a home
// whose configuration uses the kubernetes backend: on the cluster, for
// this gateway's sandbox pods (ok is false for other homes and
// subcommands).
func runKubeSandbox(ctx context.Context, sub, home, agent string, all, asJSON bool, stdout, stderr io.Writer) (int, bool) {
	if sub != "list" && sub != "recreate" && sub != "prune" {
		return 0, false
	}
	cfg, err := config.Load(filepath.Join(home, "config.json"))
	if err != nil || !kube.UsesKubernetes(cfg) {
		return 0, false
	}
	out := func(v any) {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(v)
	}
	switch sub {
	case "list":
		list, err := kube.List(ctx, home, cfg)
		if err != nil {
			// The clusters that answered are listed all the same.
			fmt.Fprintf(stderr, "conch sandbox list: %v\n", err)
			if len(list) == 0 {
				return ExitUnavailable, true
			}
		}
		if asJSON {
			out(list)
			return ExitOK, true
		}
		if len(list) == 0 {
			fmt.Fprintln(stdout, "kubernetes: no conch sandbox pods")
		}
		now := time.Now()
		for _, s := range list {
			state := s.Phase
			if s.Deleting {
				state = "deleting"
			}
			used := "never used"
			if s.LastUsedAtMs > 0 {
				used = "used " + now.Sub(time.UnixMilli(s.LastUsedAtMs)).Round(time.Second).String() + " ago"
			}
			fmt.Fprintf(stdout, "%s/%s  %s  scope %s  %s  age %s  %s  idle timeout %s\n", s.Namespace, s.Name, strings.ToLower(s.Kind), s.Scope, state,
				now.Sub(time.UnixMilli(s.CreatedAtMs)).Round(time.Second), used, s.IdleTimeout)
		}
		return ExitOK, true
	}
	var removed []string
	if sub == "recreate" {
		if (agent == "") == !all {
			fmt.Fprintln(stderr, "conch sandbox recreate: give --agent A or --all")
			return ExitUsage, true
		}
		removed, err = kube.Recreate(ctx, home, cfg, agent, all)
	} else {
		removed, err = kube.Prune(ctx, home, cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "conch sandbox %s: %v\n", sub, err)
	}
	if err != nil && len(removed) == 0 {
		return ExitUnavailable, true
	}
	if asJSON {
		out(map[string]any{"removed": removed})
	} else if len(removed) == 0 {
		fmt.Fprintln(stdout, "Nothing removed.")
	} else {
		fmt.Fprintf(stdout, "Removed %s (recreated on next use).\n", strings.Join(removed, ", "))
	}
	return ExitOK, true
}
