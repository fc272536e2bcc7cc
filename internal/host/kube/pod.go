package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
)

// Labels and annotations conch puts on its sandboxes.
const (
	LabelManaged   = "app.kubernetes.io/managed-by" // = conch
	LabelGateway   = "conch.sh/gateway"             // the gateway's id
	LabelScope     = "conch.sh/scope"               // agent-<id> | shared
	AnnoLastUsed   = "conch.sh/last-used"           // RFC 3339
	AnnoDeleteWhy  = "conch.sh/delete-reason"       // set just before conch deletes it
	AnnoIdle       = "conch.sh/idle-timeout"        // the idle timeout in force
	containerName  = "sandbox"
	homeMount      = "/var/lib/conch"
	workspaceMount = "/workspace"
	tokenMount     = "/var/run/secrets/conch"
)

// sandboxGV is the agent-sandbox API (only the documented v1alpha1
// fields spec.podTemplate, spec.replicas, spec.shutdownTime and the
// status conditions are used).
var (
	sandboxGV  = schema.GroupVersion{Group: "agents.x-k8s.io", Version: "v1alpha1"}
	sandboxGVR = sandboxGV.WithResource("sandboxes")
)

// nodeConfig is the configuration of the node in a sandbox pod: like
// every sandboxed run, commands are not gated (the pod is the boundary).
const nodeConfig = `{"tools":{"exec":{"security":"full","ask":"off"}}}`

// podName is a fresh pod name for scope.
func podName(scope string) string {
	s := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, scope)
	if len(s) > 45 {
		s = s[:45]
	}
	b := make([]byte, 5)
	rand.Read(b)
	const alpha = "bcdfghjklmnpqrstvwxz2456789"
	for i := range b {
		b[i] = alpha[int(b[i])%len(alpha)]
	}
	return "conch-" + strings.Trim(s, "-") + "-" + string(b)
}

// labelValue makes a scope a label value.
func labelValue(s string) string {
	v := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "-_.")
}

// podSpec is the pod of a sandbox: `conch node` as the container's
// command, with its join token, its pod-bound service-account token and
// the template of sandbox.kubernetes.
func podSpec(k config.KubeSettings, env map[string]string, name, token string) (corev1.PodSpec, error) {
	no := false
	exp := int64(3600)
	vars := []corev1.EnvVar{
		{Name: "CONCH_NODE_JOIN_TOKEN", Value: token},
		{Name: "CONCH_NODE_POD_TOKEN_FILE", Value: tokenMount + "/token"},
		{Name: "CONCH_NODE_CONFIG_JSON", Value: nodeConfig},
	}
	if v := os.Getenv("CONCH_NODE_PING_MS"); v != "" {
		vars = append(vars, corev1.EnvVar{Name: "CONCH_NODE_PING_MS", Value: v})
	}
	keys := make([]string, 0, len(env))
	for key := range env {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		vars = append(vars, corev1.EnvVar{Name: key, Value: env[key]})
	}
	c := corev1.Container{
		Name:    containerName,
		Image:   k.Image,
		Command: []string{k.ConchPath, "node", "--home", homeMount, "--gateway", k.GatewayURL, "--name", name, "--log-level", "warn"},
		Env:     vars, WorkingDir: workspaceMount,
		ImagePullPolicy:          corev1.PullPolicy(k.ImagePullPolicy),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "conch-home", MountPath: homeMount},
			{Name: "workspace", MountPath: workspaceMount},
			{Name: "conch-token", MountPath: tokenMount, ReadOnly: true},
		},
	}
	for part, m := range map[string]map[string]string{"requests": k.Requests, "limits": k.Limits} {
		rl := corev1.ResourceList{}
		for rn, v := range m {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return corev1.PodSpec{}, fmt.Errorf("sandbox.kubernetes.resources.%s.%s: %v", part, rn, err)
			}
			rl[corev1.ResourceName(rn)] = q
		}
		if len(rl) == 0 {
			continue
		}
		if part == "requests" {
			c.Resources.Requests = rl
		} else {
			c.Resources.Limits = rl
		}
	}
	spec := corev1.PodSpec{
		Containers:                   []corev1.Container{c},
		RestartPolicy:                corev1.RestartPolicyNever,
		ServiceAccountName:           k.ServiceAccountName,
		AutomountServiceAccountToken: &no, // the sandbox gets no API credentials
		EnableServiceLinks:           &no,
		NodeSelector:                 k.NodeSelector,
		Volumes: []corev1.Volume{
			{Name: "conch-home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "conch-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: apitype.PodTokenAudience, ExpirationSeconds: &exp, Path: "token"}},
			}}}},
		},
	}
	if k.RuntimeClassName != "" {
		rc := k.RuntimeClassName
		spec.RuntimeClassName = &rc
	}
	for _, t := range k.Tolerations {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator),
			Value: t.Value, Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds})
	}
	return spec, nil
}

// sandboxObject is the agent-sandbox Sandbox asking for the same pod.
func sandboxObject(ns, name string, meta metav1.ObjectMeta, spec corev1.PodSpec, shutdown time.Time) (*unstructured.Unstructured, error) {
	ps, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		return nil, err
	}
	tm := map[string]any{"labels": toAny(meta.Labels), "annotations": toAny(meta.Annotations)}
	sp := map[string]any{"podTemplate": map[string]any{"metadata": tm, "spec": ps}, "replicas": int64(1)}
	if !shutdown.IsZero() {
		sp["shutdownTime"] = shutdown.UTC().Format(time.RFC3339)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sandboxGV.String(), "kind": "Sandbox",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": toAny(meta.Labels), "annotations": toAny(meta.Annotations)},
		"spec":     sp,
	}}, nil
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// waitingFailures are container waiting reasons that will not resolve by
// waiting longer.
var waitingFailures = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true, "CrashLoopBackOff": true,
}

// podFailure says why pod will never run its node, or "".
func podFailure(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && waitingFailures[w.Reason] {
			return fmt.Sprintf("container %s: %s: %s", cs.Name, w.Reason, w.Message)
		}
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		msg := fmt.Sprintf("pod %s", strings.ToLower(string(p.Status.Phase)))
		if p.Status.Reason != "" {
			msg += ": " + p.Status.Reason
		}
		if p.Status.Message != "" {
			msg += ": " + p.Status.Message
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				msg += fmt.Sprintf(" (container %s exited %d", cs.Name, t.ExitCode)
				if t.Reason != "" {
					msg += ", " + t.Reason
				}
				if m := strings.TrimSpace(t.Message); m != "" {
					msg += ": " + lastLines(m, 3)
				}
				msg += ")"
			}
		}
		return msg
	}
	return ""
}

// podPending describes a pod still starting (for a timeout's message).
func podPending(p *corev1.Pod) string {
	if p == nil {
		return "the pod does not exist yet"
	}
	parts := []string{"phase " + string(p.Status.Phase)}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Reason != "" {
			parts = append(parts, fmt.Sprintf("%s: %s %s", c.Type, c.Reason, c.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			parts = append(parts, fmt.Sprintf("container %s waiting: %s %s", cs.Name, w.Reason, w.Message))
		}
	}
	if p.Spec.NodeName == "" {
		parts = append(parts, "not scheduled on a node")
	}
	return strings.Join(parts, "; ")
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " / ")
}

// warningEvents returns the cluster's recent warning events about the
// object name (newest last), as "Reason: message".
func (c *cluster) warningEvents(ctx context.Context, ns, name string) []string {
	ctx, cancel := ctxTimeout(ctx)
	defer cancel()
	l, err := c.events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return nil
	}
	evs := l
	sort.Slice(evs, func(i, j int) bool { return eventTime(evs[i]).Before(eventTime(evs[j])) })
	var out []string
	for _, e := range evs {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	if len(out) > 3 {
		out = out[len(out)-3:]
	}
	return out
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// withEvents appends the pod's warning events to reason. An eviction is
// said first: a kubelet that evicts a pod whose container exits 0 on
// SIGTERM (conch node does) leaves it in phase Succeeded with no reason
// and no condition (kubelet 1.37, a pod past its ephemeral-storage
// limit), and its Evicted event is the only record of why it stopped.
func (c *cluster) withEvents(ctx context.Context, ns, name, reason string) string {
	evs := c.warningEvents(ctx, ns, name)
	for _, e := range evs {
		if msg, ok := strings.CutPrefix(e, "Evicted: "); ok && !strings.Contains(reason, "Evicted") {
			reason += "; evicted by its node: " + msg
			break
		}
	}
	if len(evs) > 0 {
		return reason + " (events: " + strings.Join(evs, "; ") + ")"
	}
	return reason
}

// applyNetworkPolicy creates or updates the NetworkPolicy of this
// gateway's sandboxes in ns from raw (a NetworkPolicySpec).
func (c *cluster) applyNetworkPolicy(ctx context.Context, ns, gw string, raw json.RawMessage) error {
	spec, err := parseNetworkPolicy(raw)
	if err != nil {
		return fmt.Errorf("sandbox.kubernetes.networkPolicy: %v", err)
	}
	spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{LabelManaged: "conch", LabelGateway: gw}}
	if len(spec.PolicyTypes) == 0 {
		spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "conch-sandboxes-" + gw, Namespace: ns,
		Labels: map[string]string{LabelManaged: "conch", LabelGateway: gw}}, Spec: *spec}
	ctx, cancel := ctxTimeout(ctx)
	defer cancel()
	api := c.networkPolicies(ns)
	cur, err := api.Get(ctx, np.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, np, metav1.CreateOptions{})
	case err == nil:
		cur.Spec = np.Spec
		_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return c.explain(err, "apply the sandboxes' NetworkPolicy in namespace "+ns)
	}
	return nil
}

// parseNetworkPolicy decodes sandbox.kubernetes.networkPolicy strictly:
// a NetworkPolicySpec without podSelector (conch selects its pods).
func parseNetworkPolicy(raw json.RawMessage) (*networkingv1.NetworkPolicySpec, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("not a NetworkPolicy spec object: %v", err)
	}
	if _, ok := probe["podSelector"]; ok {
		return nil, errors.New("podSelector is set by conch (the sandbox pods of this gateway); leave it out")
	}
	var spec networkingv1.NetworkPolicySpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("not a NetworkPolicy spec: %v", err)
	}
	return &spec, nil
}
