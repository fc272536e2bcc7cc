package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// SandboxKubernetes is sandbox.kubernetes: where the kubernetes backend
// creates its sandbox pods and what they look like (docs/kubernetes.md).
type SandboxKubernetes struct {
	Kubeconfig         string            `json:"kubeconfig,omitempty"`
	Context            string            `json:"context,omitempty"`
	Namespace          string            `json:"namespace,omitempty"`
	GatewayURL         string            `json:"gatewayUrl,omitempty"`
	Image              string            `json:"image,omitempty"`
	ImagePullPolicy    string            `json:"imagePullPolicy,omitempty"`
	ConchPath          string            `json:"conchPath,omitempty"`
	ServiceAccountName string            `json:"serviceAccountName,omitempty"`
	RuntimeClassName   string            `json:"runtimeClassName,omitempty"`
	Resources          *KubeResources    `json:"resources,omitempty"`
	NodeSelector       map[string]string `json:"nodeSelector,omitempty"`
	Tolerations        []KubeToleration  `json:"tolerations,omitempty"`
	NetworkPolicy      json.RawMessage   `json:"networkPolicy,omitempty"`
	SandboxCRD         string            `json:"sandboxCrd,omitempty"`
	StartupTimeout     string            `json:"startupTimeout,omitempty"`
	NodeLostGrace      string            `json:"nodeLostGrace,omitempty"`
	WarmPool           *int              `json:"warmPool,omitempty"`
}

// KubeResources is sandbox.kubernetes.resources: quantities as in a pod
// spec ("500m", "1Gi").
type KubeResources struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// KubeToleration is one of sandbox.kubernetes.tolerations, as in a pod
// spec.
type KubeToleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// KubeSettings are the resolved sandbox.kubernetes values.
type KubeSettings struct {
	Kubeconfig         string // "" = in-cluster, else this file
	Context            string
	Namespace          string // "" = the context's (in-cluster: the gateway's own)
	GatewayURL         string
	Image              string
	ImagePullPolicy    string
	ConchPath          string
	ServiceAccountName string
	RuntimeClassName   string
	Requests           map[string]string
	Limits             map[string]string
	NodeSelector       map[string]string
	Tolerations        []KubeToleration
	NetworkPolicy      json.RawMessage // a NetworkPolicySpec; nil: none
	SandboxCRD         string          // auto | always | never
	StartupTimeout     time.Duration
	NodeLostGrace      time.Duration // a not-ready pod with its link down this long is lost
	WarmPool           int           // ready pods kept for first calls
}

// The defaults and allowed values of sandbox.kubernetes.
const (
	DefaultKubeConchPath      = "/usr/local/bin/conch"
	DefaultKubeStartupTimeout = 2 * time.Minute
	DefaultKubeNodeLostGrace  = 30 * time.Second
	MaxKubeWarmPool           = 100
	DefaultIdleTimeout        = 30 * time.Minute
)

var (
	kubeCRDValues        = []string{"auto", "always", "never"}
	kubePullPolicies     = []string{"Always", "IfNotPresent", "Never"}
	tolerationOperators  = []string{"Exists", "Equal"}
	tolerationEffects    = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}
	standardResourceKeys = []string{"cpu", "memory", "ephemeral-storage"}
)

func init() {
	maps.Copy(descriptions, map[string]string{
		"Sandbox.kubernetes":  "the kubernetes backend: sandboxes as pods that dial back to this gateway (docs/kubernetes.md)",
		"Sandbox.idleTimeout": "kubernetes backend: delete a sandbox pod unused this long, a Go duration (default 30m; 0: never)",

		"SandboxKubernetes.kubeconfig":         "kubeconfig file of the cluster (default: in-cluster configuration)",
		"SandboxKubernetes.context":            "kubeconfig context (default: its current context)",
		"SandboxKubernetes.namespace":          "namespace of the sandbox pods (default: the context's, in-cluster the gateway's own)",
		"SandboxKubernetes.gatewayUrl":         "URL of this gateway as the pods reach it (required), http(s)://host:port",
		"SandboxKubernetes.image":              "container image with conch at conchPath and the tools agents use (required)",
		"SandboxKubernetes.imagePullPolicy":    "Always, IfNotPresent or Never (default: the cluster's)",
		"SandboxKubernetes.conchPath":          "absolute path of the conch binary in the image (default /usr/local/bin/conch)",
		"SandboxKubernetes.serviceAccountName": "service account of the sandbox pods, whose pod-bound token pairs them (default default)",
		"SandboxKubernetes.runtimeClassName":   "RuntimeClass of the sandbox pods (gVisor, Kata, ...; default: the cluster's)",
		"SandboxKubernetes.resources":          "resource requests and limits of the sandbox container",
		"SandboxKubernetes.nodeSelector":       "node labels the sandbox pods must be scheduled on",
		"SandboxKubernetes.tolerations":        "tolerations of the sandbox pods, as in a pod spec: key, operator (Exists, Equal), value, effect (NoSchedule, PreferNoSchedule, NoExecute), tolerationSeconds",
		"SandboxKubernetes.networkPolicy":      "a NetworkPolicy spec (without podSelector) applied to the sandbox pods",
		"SandboxKubernetes.sandboxCrd":         "use the agent-sandbox Sandbox resource: auto (default: when installed), always, never (plain pods)",
		"SandboxKubernetes.startupTimeout":     "how long a sandboxed call waits for its pod to start and pair, a Go duration (default 2m)",
		"SandboxKubernetes.warmPool":           "how many started, paired sandbox pods to keep ready for an agent's first sandboxed call (plain pods; default 0: none)",
		"SandboxKubernetes.nodeLostGrace":      "how long a sandbox pod may be not ready (its node lost) with its node link down before its sessions end lost, a Go duration (default 30s)",

		"KubeResources.requests": "resource requests, e.g. {\"cpu\": \"500m\", \"memory\": \"1Gi\"}",
		"KubeResources.limits":   "resource limits, e.g. {\"cpu\": \"2\", \"memory\": \"4Gi\"}",
	})
}

// validate checks sandbox.kubernetes (prefix names it in errors).
func (k *SandboxKubernetes) validate(prefix string) error {
	if k == nil {
		return nil
	}
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", prefix, key, fmt.Sprintf(format, a...)))
	}
	if k.Namespace != "" {
		if !dns1123Label().MatchString(k.Namespace) {
			bad("namespace", "%q is not a namespace name (lower-case letters, digits and '-', at most 63)", k.Namespace)
		}
	}
	if k.GatewayURL != "" {
		u, err := url.Parse(k.GatewayURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("gatewayUrl", "%q is not an http:// or https:// URL with a host", k.GatewayURL)
		}
	}
	if k.Image != "" && strings.ContainsAny(k.Image, " \t\n") {
		bad("image", "%q contains white space", k.Image)
	}
	if k.ImagePullPolicy != "" && !slices.Contains(kubePullPolicies, k.ImagePullPolicy) {
		bad("imagePullPolicy", "invalid value %q (want one of %s)", k.ImagePullPolicy, strings.Join(kubePullPolicies, ", "))
	}
	if k.ConchPath != "" && !path.IsAbs(k.ConchPath) {
		bad("conchPath", "%q is not an absolute path", k.ConchPath)
	}
	for key, v := range map[string]string{"serviceAccountName": k.ServiceAccountName, "runtimeClassName": k.RuntimeClassName} {
		if v != "" {
			if !dns1123Subdomain(v) {
				bad(key, "%q is not a valid name (lower-case letters, digits, '-' and '.', at most 253)", v)
			}
		}
	}
	if r := k.Resources; r != nil {
		for _, part := range []struct {
			name string
			m    map[string]string
		}{{"requests", r.Requests}, {"limits", r.Limits}} {
			for name, v := range part.m {
				key := "resources." + part.name + "." + name
				if !slices.Contains(standardResourceKeys, name) && !extendedResource().MatchString(name) {
					bad(key, "unknown resource (want cpu, memory, ephemeral-storage or an extended resource such as nvidia.com/gpu)")
					continue
				}
				if !quantityRE().MatchString(v) {
					bad(key, "%q is not a quantity (such as 500m, 2, 1Gi)", v)
				}
			}
		}
	}
	for lk, lv := range k.NodeSelector {
		if !qualifiedName(lk) {
			bad("nodeSelector", "label key %q is not a valid label key ([prefix/]name)", lk)
		}
		if lv != "" && (len(lv) > 63 || !labelValueRE().MatchString(lv)) {
			bad("nodeSelector", "label value %q is not a valid label value", lv)
		}
	}
	for i, t := range k.Tolerations {
		key := fmt.Sprintf("tolerations[%d]", i)
		if t.Operator != "" && !slices.Contains(tolerationOperators, t.Operator) {
			bad(key+".operator", "invalid value %q (want Exists or Equal)", t.Operator)
		}
		if t.Effect != "" && !slices.Contains(tolerationEffects, t.Effect) {
			bad(key+".effect", "invalid value %q (want NoSchedule, PreferNoSchedule or NoExecute)", t.Effect)
		}
		if t.Key == "" && t.Operator != "Exists" {
			bad(key+".key", "an empty key needs operator Exists")
		}
		if t.Key != "" && !qualifiedName(t.Key) {
			bad(key+".key", "%q is not a valid taint key", t.Key)
		}
		if t.Operator == "Exists" && t.Value != "" {
			bad(key+".value", "must be empty with operator Exists")
		}
		if t.TolerationSeconds != nil && t.Effect != "NoExecute" {
			bad(key+".tolerationSeconds", "only applies to effect NoExecute")
		}
	}
	if len(k.NetworkPolicy) > 0 && !bytes.Equal(bytes.TrimSpace(k.NetworkPolicy), []byte("null")) {
		if err := checkNetworkPolicy(k.NetworkPolicy); err != nil {
			bad("networkPolicy", "%v", err)
		}
	}
	if k.SandboxCRD != "" && !slices.Contains(kubeCRDValues, strings.ToLower(k.SandboxCRD)) {
		bad("sandboxCrd", "invalid value %q (want auto, always or never)", k.SandboxCRD)
	}
	if k.StartupTimeout != "" {
		if d, err := time.ParseDuration(k.StartupTimeout); err != nil || d <= 0 {
			bad("startupTimeout", "%q is not a positive duration (such as 90s, 5m)", k.StartupTimeout)
		}
	}
	if k.WarmPool != nil && (*k.WarmPool < 0 || *k.WarmPool > MaxKubeWarmPool) {
		bad("warmPool", "%d is out of range (0 to %d)", *k.WarmPool, MaxKubeWarmPool)
	}
	if k.NodeLostGrace != "" {
		if d, err := time.ParseDuration(k.NodeLostGrace); err != nil || d <= 0 {
			bad("nodeLostGrace", "%q is not a positive duration (such as 30s, 2m)", k.NodeLostGrace)
		}
	}
	return errors.Join(errs...)
}

// checkNetworkPolicy checks the shape of sandbox.kubernetes.networkPolicy:
// an object with policyTypes, ingress and egress only (conch sets
// podSelector). The kubernetes backend decodes the rules strictly into a
// NetworkPolicySpec when it applies them, and the API server validates
// them.
func checkNetworkPolicy(raw json.RawMessage) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return fmt.Errorf("not a NetworkPolicy spec object: %v", err)
	}
	for key, v := range probe {
		switch key {
		case "podSelector":
			return errors.New("podSelector is set by conch (the sandbox pods of this gateway); leave it out")
		case "policyTypes":
			var ts []string
			if err := json.Unmarshal(v, &ts); err != nil {
				return errors.New("policyTypes: want a list of Ingress and Egress")
			}
			for _, t := range ts {
				if t != "Ingress" && t != "Egress" {
					return fmt.Errorf("policyTypes: invalid value %q (want Ingress or Egress)", t)
				}
			}
		case "ingress", "egress":
			var rules []map[string]json.RawMessage
			if err := json.Unmarshal(v, &rules); err != nil {
				return fmt.Errorf("%s: want a list of rule objects", key)
			}
		default:
			return fmt.Errorf("unknown key %q (want policyTypes, ingress, egress)", key)
		}
	}
	return nil
}

// Name rules of Kubernetes (without importing it: this package stays a
// standard-library leaf).
var (
	dns1123Label     = lazyRE(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dns1123Part      = lazyRE(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	qualifiedNameRE  = lazyRE(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelValueRE     = lazyRE(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	extendedResource = lazyRE(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	quantityRE       = lazyRE(quantityPattern)
)

func dns1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, p := range strings.Split(s, ".") {
		if !dns1123Part().MatchString(p) {
			return false
		}
	}
	return true
}

func qualifiedName(s string) bool {
	prefix, name, ok := strings.Cut(s, "/")
	if !ok {
		name, prefix = prefix, ""
	} else if !dns1123Subdomain(prefix) {
		return false
	}
	return qualifiedNameRE().MatchString(name)
}

// validateIdle checks sandbox.idleTimeout.
func validateIdle(prefix, v string) error {
	if v == "" {
		return nil
	}
	if d, err := time.ParseDuration(v); err != nil || d < 0 {
		if v != "0" {
			return fmt.Errorf("%s.idleTimeout: %q is not a duration (such as 30m, 2h; 0: never)", prefix, v)
		}
	}
	return nil
}

// applyKube applies a sandbox section's kubernetes keys over s.
func (s *SandboxSettings) applyKube(x *Sandbox) {
	if x.IdleTimeout != "" {
		if d, err := time.ParseDuration(x.IdleTimeout); err == nil && d >= 0 {
			s.IdleTimeout = d
		} else if x.IdleTimeout == "0" {
			s.IdleTimeout = 0
		}
	}
	k := x.Kubernetes
	if k == nil {
		return
	}
	str := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	str(&s.Kube.Kubeconfig, k.Kubeconfig)
	str(&s.Kube.Context, k.Context)
	str(&s.Kube.Namespace, k.Namespace)
	str(&s.Kube.GatewayURL, k.GatewayURL)
	str(&s.Kube.Image, k.Image)
	str(&s.Kube.ImagePullPolicy, k.ImagePullPolicy)
	str(&s.Kube.ConchPath, k.ConchPath)
	str(&s.Kube.ServiceAccountName, k.ServiceAccountName)
	str(&s.Kube.RuntimeClassName, k.RuntimeClassName)
	if k.SandboxCRD != "" {
		s.Kube.SandboxCRD = strings.ToLower(k.SandboxCRD)
	}
	if r := k.Resources; r != nil {
		if r.Requests != nil {
			s.Kube.Requests = maps.Clone(r.Requests)
		}
		if r.Limits != nil {
			s.Kube.Limits = maps.Clone(r.Limits)
		}
	}
	if k.NodeSelector != nil {
		s.Kube.NodeSelector = maps.Clone(k.NodeSelector)
	}
	if k.Tolerations != nil {
		s.Kube.Tolerations = slices.Clone(k.Tolerations)
	}
	if len(k.NetworkPolicy) > 0 {
		if bytes.Equal(bytes.TrimSpace(k.NetworkPolicy), []byte("null")) {
			s.Kube.NetworkPolicy = nil
		} else {
			s.Kube.NetworkPolicy = k.NetworkPolicy
		}
	}
	if d, err := time.ParseDuration(k.StartupTimeout); err == nil && d > 0 {
		s.Kube.StartupTimeout = d
	}
	if d, err := time.ParseDuration(k.NodeLostGrace); err == nil && d > 0 {
		s.Kube.NodeLostGrace = d
	}
	if k.WarmPool != nil {
		s.Kube.WarmPool = *k.WarmPool
	}
}

// KubeMissing names the required sandbox.kubernetes keys that resolved
// settings lack ("" when complete).
func (s SandboxSettings) KubeMissing() string {
	var miss []string
	if s.Kube.GatewayURL == "" {
		miss = append(miss, "sandbox.kubernetes.gatewayUrl (the URL the pods dial back to)")
	}
	if s.Kube.Image == "" {
		miss = append(miss, "sandbox.kubernetes.image (an image with conch in it)")
	}
	return strings.Join(miss, " and ")
}

// validateKube checks, for every agent whose resolved backend is
// kubernetes, that the keys the backend needs are set (they may come from
// the global section and the agent's, key by key).
func (c *Config) validateKube() error {
	var errs []error
	agents := []string{"main"}
	for _, a := range slices.Sorted(maps.Keys(c.Agents)) {
		if a != "main" {
			agents = append(agents, a)
		}
	}
	for _, a := range agents {
		s := c.SandboxFor(a)
		if s.Backend != "kubernetes" || !s.On {
			continue
		}
		if m := s.KubeMissing(); m != "" {
			where := "sandbox"
			if a != "main" {
				where = "agents." + a + ".sandbox"
			}
			errs = append(errs, fmt.Errorf("%s.backend is kubernetes for agent %s, but %s is not set", where, a, m))
		}
	}
	return errors.Join(errs...)
}

// kubeSchema completes the inferred schema of sandbox.kubernetes.
func kubeSchema(s *jsonschema.Schema) {
	s.Properties["sandboxCrd"] = enumSchema(append([]string{""}, kubeCRDValues...), "", false)
	s.Properties["imagePullPolicy"] = &jsonschema.Schema{Type: "string", Enum: anyOf(append([]string{""}, kubePullPolicies...))}
	s.Properties["conchPath"].Pattern = "^/"
	s.Properties["gatewayUrl"].Pattern = "^https?://[^/]+"
	s.Properties["namespace"].Pattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	s.Properties["startupTimeout"].Pattern = durationPattern
	s.Properties["nodeLostGrace"].Pattern = durationPattern
	s.Properties["warmPool"].Minimum = jsonschema.Ptr(0.0)
	s.Properties["warmPool"].Maximum = jsonschema.Ptr(float64(MaxKubeWarmPool))
	s.Properties["networkPolicy"] = &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
		Properties: map[string]*jsonschema.Schema{
			"policyTypes": {Type: "array", Items: &jsonschema.Schema{Type: "string", Enum: []any{"Ingress", "Egress"}}, Description: "Ingress, Egress or both"},
			"ingress":     {Type: "array", Items: &jsonschema.Schema{Type: "object"}, Description: "NetworkPolicyIngressRule objects"},
			"egress":      {Type: "array", Items: &jsonschema.Schema{Type: "object"}, Description: "NetworkPolicyEgressRule objects"},
		}}
}

// kubeResourcesSchema completes the inferred schema of
// sandbox.kubernetes.resources: resource names and quantities.
func kubeResourcesSchema(s *jsonschema.Schema) {
	for _, k := range []string{"requests", "limits"} {
		s.Properties[k].PropertyNames = &jsonschema.Schema{Pattern: `^(cpu|memory|ephemeral-storage|[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$`}
		s.Properties[k].AdditionalProperties = &jsonschema.Schema{Type: "string", Pattern: quantityPattern}
	}
}

// quantityPattern matches a non-negative resource quantity.
const quantityPattern = `^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$`

// durationPattern matches what time.ParseDuration accepts without a sign.
const durationPattern = `^(0|([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`

// kubeTolerationSchema completes the inferred schema of a toleration.
func kubeTolerationSchema(s *jsonschema.Schema) {
	s.Properties["operator"] = &jsonschema.Schema{Type: "string", Enum: anyOf(append([]string{""}, tolerationOperators...))}
	s.Properties["effect"] = &jsonschema.Schema{Type: "string", Enum: anyOf(append([]string{""}, tolerationEffects...))}
}
