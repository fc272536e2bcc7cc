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

// target is one namespace of one cluster some agent's sandboxes live in.
type target struct {
	cl *cluster
	ns string
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

func targets(cfg *config.Config) ([]target, error) {
	var out []target
	seen := map[string]bool{}
	var errs []error
	for _, a := range agents(cfg) {
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
		if key := cl.host + "\x00" + ns; !seen[key] {
			seen[key] = true
			out = append(out, target{cl, ns})
		}
	}
	return out, errors.Join(errs...)
}

// List returns the sandboxes of home's gateway in every namespace its
// configuration uses.
func List(ctx context.Context, home string, cfg *config.Config) ([]Sandbox, error) {
	gw, err := GatewayID(home)
	if err != nil {
		return nil, err
	}
	ts, terr := targets(cfg)
	out := []Sandbox{}
	for _, t := range ts {
		cctx, cancel := ctxTimeout(ctx)
		l, err := t.cl.cs.CoreV1().Pods(t.ns).List(cctx, metav1.ListOptions{LabelSelector: LabelManaged + "=conch," + LabelGateway + "=" + gw})
		cancel()
		if err != nil {
			return out, t.cl.explain(err, "list the sandbox pods in namespace "+t.ns)
		}
		for _, p := range l.Items {
			sb := Sandbox{Namespace: p.Namespace, Name: p.Name, Kind: p.Labels["conch.sh/kind"], Scope: p.Annotations["conch.sh/scope"],
				Agent: p.Annotations["conch.sh/agent"], Phase: string(p.Status.Phase), Node: p.Spec.NodeName,
				CreatedAtMs: p.CreationTimestamp.UnixMilli(), IdleTimeout: p.Annotations[AnnoIdle], Deleting: p.DeletionTimestamp != nil}
			if tm, err := time.Parse(time.RFC3339, p.Annotations[AnnoLastUsed]); err == nil {
				sb.LastUsedAtMs = tm.UnixMilli()
			}
			out = append(out, sb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, terr
}

// Recreate deletes agent's sandbox (all: every sandbox of the gateway):
// the next sandboxed call creates a new one with the current
// configuration. It returns the names deleted.
func Recreate(ctx context.Context, home string, cfg *config.Config, agent string, all bool) ([]string, error) {
	want := ""
	if !all {
		want = cfg.SandboxFor(agent).Scope
	}
	return deleteWhere(ctx, home, cfg, "conch sandbox recreate", func(s Sandbox) bool { return all || s.Scope == want })
}

// Prune deletes the sandboxes unused for longer than their idle timeout
// (the gateway deletes them itself while it runs; this catches those a
// stopped gateway left).
func Prune(ctx context.Context, home string, cfg *config.Config) ([]string, error) {
	now := time.Now()
	return deleteWhere(ctx, home, cfg, "conch sandbox prune: idle", func(s Sandbox) bool {
		d, err := time.ParseDuration(s.IdleTimeout)
		if err != nil || d <= 0 || s.LastUsedAtMs == 0 {
			return false
		}
		return now.Sub(time.UnixMilli(s.LastUsedAtMs)) > d
	})
}

func deleteWhere(ctx context.Context, home string, cfg *config.Config, reason string, match func(Sandbox) bool) ([]string, error) {
	list, err := List(ctx, home, cfg)
	if err != nil {
		return []string{}, err
	}
	ts, _ := targets(cfg)
	removed := []string{}
	for _, s := range list {
		if s.Deleting || !match(s) {
			continue
		}
		for _, t := range ts {
			if t.ns != s.Namespace {
				continue
			}
			if err := deleteSandbox(ctx, t.cl, s.Namespace, s.Name, s.Kind, reason); err != nil {
				return removed, err
			}
			removed = append(removed, s.Namespace+"/"+s.Name)
			break
		}
	}
	return removed, nil
}
