package admin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
	_ "github.com/conchsh/conch/internal/host/sandbox/backends" // sandbox.For and New know every backend
)

// dockerBackend returns a new docker backend, its availability probed
// afresh by each operator command.
func dockerBackend() (sandbox.Containers, error) {
	d, ok := sandbox.New("docker", config.SandboxSettings{}).(sandbox.Containers)
	if !ok {
		return nil, errors.New("the docker sandbox backend is not built into this program")
	}
	return d, nil
}

func sandboxAgents(cfg *config.Config) []string {
	agents := []string{"main"}
	for id := range cfg.Agents {
		if id != "main" {
			agents = append(agents, id)
		}
	}
	sort.Strings(agents[1:])
	return agents
}

// SandboxStatusOf reports the sandbox of every configured agent and the
// docker containers (what `conch sandbox` and GET /v1/sandbox show).
func SandboxStatusOf(ctx context.Context, home string) (apitype.SandboxStatus, error) {
	cfg, err := config.Load(filepath.Join(home, "config.json"))
	if err != nil {
		return apitype.SandboxStatus{}, err
	}
	st := apitype.SandboxStatus{LandlockABI: sandbox.LandlockABI(), Containers: []sandbox.Container{}}
	for _, a := range sandboxAgents(cfg) {
		sb := cfg.SandboxFor(a)
		row := apitype.SandboxAgent{Agent: a, Mode: sb.Mode, On: sb.On, Scope: sb.Scope, WorkspaceAccess: sb.WorkspaceAccess, Network: sb.Network}
		if r, ok := sandbox.RemoteOf(sb.Backend); sb.On && ok {
			row.Backend, row.Layers = sb.Backend, r.Layers(sb)
		} else if sb.On {
			if b, err := sandbox.For(ctx, sb); err != nil {
				row.Error = err.Error()
			} else {
				row.Backend, row.Layers = b.Name(), b.Layers(&sandbox.Run{Settings: sb})
				if g, ok := b.(sandbox.Gapped); ok {
					row.Gaps = g.Gaps(&sandbox.Run{Settings: sb})
				}
			}
		}
		st.Agents = append(st.Agents, row)
	}
	if d, err := dockerBackend(); err != nil {
		st.DockerError = err.Error()
	} else if err := d.Available(ctx); err != nil {
		st.DockerError = err.Error()
	} else if cs, err := d.List(ctx); err != nil {
		st.DockerError = err.Error()
	} else {
		st.Containers = cs
	}
	return st, nil
}

// SandboxRecreate removes the docker container of agent's scope (or of
// every scope with all), so the next run creates it with the current
// configuration. It returns the containers removed.
func SandboxRecreate(ctx context.Context, home, agent string, all bool) ([]string, error) {
	d, err := dockerBackend()
	if err != nil {
		return nil, err
	}
	if err := d.Available(ctx); err != nil {
		return nil, fmt.Errorf("docker: %w (only docker sandboxes are recreated; bwrap and landlock sandboxes are made fresh for every run)", err)
	}
	cs, err := d.List(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(filepath.Join(home, "config.json"))
	if err != nil {
		return nil, err
	}
	want := ""
	if !all {
		want = d.ContainerName(cfg.SandboxFor(agent).Scope)
	}
	removed := []string{}
	for _, c := range cs {
		if all || c.Name == want {
			if err := d.Remove(ctx, c.Scope); err != nil {
				return removed, err
			}
			removed = append(removed, c.Name)
		}
	}
	return removed, nil
}

// SandboxPrune removes idle or old docker sandboxes now.
func SandboxPrune(ctx context.Context, home string) ([]string, error) {
	d, err := dockerBackend()
	if err != nil {
		return nil, err
	}
	if err := d.Available(ctx); err != nil {
		return nil, fmt.Errorf("docker: %w (nothing to prune: bwrap and landlock keep no containers)", err)
	}
	cfg, err := config.Load(filepath.Join(home, "config.json"))
	if err != nil {
		return nil, err
	}
	ds := cfg.SandboxFor("main").Docker
	hours := func(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }
	gone, err := d.Prune(ctx, hours(ds.IdleHours), hours(ds.MaxAgeDays*24))
	if gone == nil {
		gone = []string{}
	}
	return gone, err
}
