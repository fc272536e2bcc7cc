package kube

import (
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/conchsh/conch/internal/config"
)

// TestPodNames: the pod name and scope label of every scope an agent id
// can give are valid Kubernetes names and label values.
func TestPodNames(t *testing.T) {
	ids := []string{"main", "shared", "a", strings.Repeat("x", 64), "Build_1", "a.b", "UPPER", "-lead", "trail-", "ü", "a--b"}
	for _, c := range "_.-0123456789ABCxyz" {
		ids = append(ids, "a"+string(c)+"b", string(c)+"a", "a"+string(c))
	}
	for _, id := range ids {
		for _, scope := range []string{"agent-" + id, "shared"} {
			n := podName(scope)
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				t.Errorf("scope %q: pod name %q: %v", scope, n, errs)
			}
			if errs := validation.IsValidLabelValue(labelValue(scope)); len(errs) > 0 {
				t.Errorf("scope %q: label %q: %v", scope, labelValue(scope), errs)
			}
		}
	}
}

func TestPodSpec(t *testing.T) {
	secs := int64(30)
	k := config.KubeSettings{Image: "img:1", ConchPath: "/opt/conch", GatewayURL: "http://gw:7878", ServiceAccountName: "sb",
		RuntimeClassName: "kata", Requests: map[string]string{"cpu": "250m"}, Limits: map[string]string{"memory": "1Gi"},
		NodeSelector: map[string]string{"pool": "a"}, Tolerations: []config.KubeToleration{{Key: "k", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs}}}
	spec, err := podSpec(k, map[string]string{"LANG": "C.UTF-8"}, "conch-x-abcde", "cnj_tok")
	if err != nil {
		t.Fatal(err)
	}
	c := spec.Containers[0]
	if c.Image != "img:1" || c.Command[0] != "/opt/conch" || c.Command[1] != "node" || !strings.Contains(strings.Join(c.Command, " "), "--gateway http://gw:7878 --name conch-x-abcde") {
		t.Fatalf("container: %+v", c)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["CONCH_NODE_JOIN_TOKEN"] != "cnj_tok" || env["CONCH_NODE_POD_TOKEN_FILE"] != tokenMount+"/token" || env["LANG"] != "C.UTF-8" || env["CONCH_NODE_CONFIG_JSON"] == "" {
		t.Fatalf("env: %v", env)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || spec.RestartPolicy != corev1.RestartPolicyNever ||
		*spec.RuntimeClassName != "kata" || spec.ServiceAccountName != "sb" || spec.NodeSelector["pool"] != "a" ||
		c.Resources.Requests.Cpu().String() != "250m" || c.Resources.Limits.Memory().String() != "1Gi" || *spec.Tolerations[0].TolerationSeconds != 30 {
		t.Fatalf("spec: %+v", spec)
	}
	var proj *corev1.ServiceAccountTokenProjection
	for _, v := range spec.Volumes {
		if v.Projected != nil {
			proj = v.Projected.Sources[0].ServiceAccountToken
		}
	}
	if proj == nil || proj.Audience != "conch" {
		t.Fatalf("no projected token for audience conch: %+v", spec.Volumes)
	}
}

// TestPodFailure: the states that never lead to a running node are
// failures with the cluster's reason; a pod still starting is not.
func TestPodFailure(t *testing.T) {
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "msg of " + reason}}}}}}
	}
	for reason := range waitingFailures {
		if f := podFailure(waiting(reason)); !strings.Contains(f, reason) || !strings.Contains(f, "msg of "+reason) {
			t.Errorf("%s: %q", reason, f)
		}
	}
	for _, reason := range []string{"ContainerCreating", "PodInitializing"} {
		if f := podFailure(waiting(reason)); f != "" {
			t.Errorf("%s is a failure: %q", reason, f)
		}
	}
	ev := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}}
	if f := podFailure(ev); !regexp.MustCompile(`failed: Evicted: The node was low on resource: memory`).MatchString(f) {
		t.Errorf("evicted: %q", f)
	}
	ex := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "a\nb\nconch node: the gateway refused the join token"}}}}}}
	if f := podFailure(ex); !strings.Contains(f, "exited 1") || !strings.Contains(f, "refused the join token") {
		t.Errorf("exited: %q", f)
	}
	if f := podFailure(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}); f != "" {
		t.Errorf("running: %q", f)
	}
}
