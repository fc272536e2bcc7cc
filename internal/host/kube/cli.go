package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conchsh/conch/internal/config"
)

// Sandbox is one sandbox pod of a gateway (`conch sandbox list`).
type Sandbox struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Kind         string `json:"kind"` // Pod | Sandbox
	Scope        string `json:"scope"`
	Agent        string `json:"agent"`
	Phase        string `json:"phase"`
	Node         string `json:"node,omitempty"`
	CreatedAtMs  int64  `json:"createdAtMs"`
	LastUsedAtMs int64  `json:"lastUsedAtMs"`
	IdleTimeout  string `json:"idleTimeout,omitempty"`
	Deleting     bool   `json:"deleting,omitempty"`
}

// target is one namespace of one cluster some agents' sandboxes live in.
type target struct {
	cl     *cluster
	ns     string
	scopes []string // the scopes of the agents that use it
}

// UsesKubernetes reports whether some agent's sandbox backend is
// kubernetes.
func UsesKubernetes(cfg *config.Config) bool {
	for _, a := range agents(cfg) {
		if s := cfg.SandboxFor(a); s.On && s.Backend == "kubernetes" {
			return true
		}
	}
	return false
}

func agents(cfg *config.Config) []string {
	out := []string{"main"}
	for id := range cfg.Agents {
		if id != "main" {
			out = append(out, id)
		}
	}
	sort.Strings(out[1:])
	return out
}

// targets returns the namespaces of the agents (every agent when only is
// empty) whose backend is kubernetes, and the errors of those whose
// cluster configuration is unusable.
func targets(cfg *config.Config, only string) ([]*target, error) {
	var out []*target
	seen := map[string]*target{}
	var errs []error
	for _, a := range agents(cfg) {
		if only != "" && a != only {
			continue
		}
		s := cfg.SandboxFor(a)
		if !s.On || s.Backend != "kubernetes" {
			continue
		}
		cl, err := clusterFor(s.Kube)
		if err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", a, err))
			continue
		}
		ns := cl.namespace(s.Kube)
		key := cl.host + "\x00" + ns
		if t := seen[key]; t != nil {
			t.scopes = append(t.scopes, s.Scope)
			continue
		}
		t := &target{cl: cl, ns: ns, scopes: []string{s.Scope}}
		seen[key] = t
		out = append(out, t)
	}
	if only != "" && len(out) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("agent %s does not use the kubernetes backend", only))
	}
	return out, errors.Join(errs...)
}

func (t *target) list(ctx context.Context, gw string) ([]Sandbox, error) {
	cctx, cancel := ctxTimeout(ctx)
	defer cancel()
	l, err := t.cl.pods(t.ns).List(cctx, metav1.ListOptions{LabelSelector: LabelManaged + "=conch," + LabelGateway + "=" + gw})
	if err != nil {
		return nil, t.cl.explain(err, "list the sandbox pods in namespace "+t.ns)
	}
	var out []Sandbox
	for _, p := range l {
		sb := Sandbox{Namespace: p.Namespace, Name: p.Name, Kind: p.Labels["conch.sh/kind"], Scope: p.Annotations["conch.sh/scope"],
			Agent: p.Annotations["conch.sh/agent"], Phase: string(p.Status.Phase), Node: p.Spec.NodeName,
			CreatedAtMs: p.CreationTimestamp.UnixMilli(), IdleTimeout: p.Annotations[AnnoIdle], Deleting: p.DeletionTimestamp != nil}
		if tm, err := time.Parse(time.RFC3339, p.Annotations[AnnoLastUsed]); err == nil {
			sb.LastUsedAtMs = tm.UnixMilli()
		}
		out = append(out, sb)
	}
	return out, nil
}

// List returns the sandboxes of home's gateway in every namespace its
// configuration uses. A cluster that cannot be listed is an error joined
// to the result; the others are still listed.
func List(ctx context.Context, home string, cfg *config.Config) ([]Sandbox, error) {
	gw, err := GatewayID(home)
	if err != nil {
		return nil, err
	}
	ts, terr := targets(cfg, "")
	errs := []error{terr}
	out := []Sandbox{}
	for _, t := range ts {
		l, err := t.list(ctx, gw)
		errs = append(errs, err)
		out = append(out, l...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, errors.Join(errs...)
}

// Recreate deletes agent's sandbox (all: every sandbox of the gateway):
// the next sandboxed call creates a new one with the current
// configuration. It returns the names deleted.
func Recreate(ctx context.Context, home string, cfg *config.Config, agent string, all bool) ([]string, error) {
	only, want := agent, ""
	if all {
		only = ""
	} else {
		want = cfg.SandboxFor(agent).Scope
	}
	return deleteWhere(ctx, home, cfg, only, "conch sandbox recreate", func(s Sandbox) bool { return all || s.Scope == want })
}

// Prune deletes the sandboxes unused for longer than their idle timeout
// (the gateway deletes them itself while it runs; this catches those a
// stopped gateway left).
func Prune(ctx context.Context, home string, cfg *config.Config) ([]string, error) {
	now := time.Now()
	return deleteWhere(ctx, home, cfg, "", "conch sandbox prune: idle", func(s Sandbox) bool {
		d, err := time.ParseDuration(s.IdleTimeout)
		if err != nil || d <= 0 || s.LastUsedAtMs == 0 {
			return false
		}
		return now.Sub(time.UnixMilli(s.LastUsedAtMs)) > d
	})
}

func deleteWhere(ctx context.Context, home string, cfg *config.Config, only, reason string, match func(Sandbox) bool) ([]string, error) {
	gw, err := GatewayID(home)
	if err != nil {
		return []string{}, err
	}
	ts, terr := targets(cfg, only)
	errs := []error{terr}
	removed := []string{}
	for _, t := range ts {
		l, err := t.list(ctx, gw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range l {
			if s.Deleting || !match(s) {
				continue
			}
			if err := deleteSandbox(ctx, t.cl, s.Namespace, s.Name, s.Kind, reason); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, s.Namespace+"/"+s.Name)
		}
	}
	return removed, errors.Join(errs...)
}
