package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKubeValidation: every bad value of sandbox.kubernetes (in the global
// section and in an agent's) is refused with an error naming its key.
func TestKubeValidation(t *testing.T) {
	bad := map[string]string{
		`"namespace": "Agents"`:                                                         "kubernetes.namespace",
		`"namespace": "-x"`:                                                             "kubernetes.namespace",
		`"gatewayUrl": "ftp://gw:1"`:                                                    "kubernetes.gatewayUrl",
		`"gatewayUrl": "http://"`:                                                       "kubernetes.gatewayUrl",
		`"image": "a b"`:                                                                "kubernetes.image",
		`"imagePullPolicy": "sometimes"`:                                                "kubernetes.imagePullPolicy",
		`"conchPath": "bin/conch"`:                                                      "kubernetes.conchPath",
		`"serviceAccountName": "Bad_Name"`:                                              "kubernetes.serviceAccountName",
		`"runtimeClassName": "g visor"`:                                                 "kubernetes.runtimeClassName",
		`"resources": {"requests": {"cpu": "lots"}}`:                                    "kubernetes.resources.requests.cpu",
		`"resources": {"limits": {"memory": "-1Gi"}}`:                                   "kubernetes.resources.limits.memory",
		`"resources": {"limits": {"gpu": "1"}}`:                                         "kubernetes.resources.limits.gpu",
		`"nodeSelector": {"bad key!": "x"}`:                                             "kubernetes.nodeSelector",
		`"nodeSelector": {"pool": "bad value!"}`:                                        "kubernetes.nodeSelector",
		`"tolerations": [{"key": "k", "operator": "Near"}]`:                             "kubernetes.tolerations[0].operator",
		`"tolerations": [{"key": "k", "effect": "Sometimes"}]`:                          "kubernetes.tolerations[0].effect",
		`"tolerations": [{"operator": "Equal"}]`:                                        "kubernetes.tolerations[0].key",
		`"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]`:             "kubernetes.tolerations[0].value",
		`"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]`: "kubernetes.tolerations[0].tolerationSeconds",
		`"networkPolicy": {"podSelector": {}}`:                                          "kubernetes.networkPolicy",
		`"networkPolicy": {"policyTypes": ["Sideways"]}`:                                "kubernetes.networkPolicy",
		`"networkPolicy": {"egres": []}`:                                                "kubernetes.networkPolicy",
		`"networkPolicy": []`:                                                           "kubernetes.networkPolicy",
		`"sandboxCrd": "maybe"`:                                                         "kubernetes.sandboxCrd",
		`"startupTimeout": "soon"`:                                                      "kubernetes.startupTimeout",
		`"startupTimeout": "-1s"`:                                                       "kubernetes.startupTimeout",
		`"warmPool": -1`:                                                                "kubernetes.warmPool",
		`"nodeLostGrace": "0s"`:                                                         "kubernetes.nodeLostGrace",
	}
	for frag, key := range bad {
		for _, where := range []string{"sandbox", "agents.a.sandbox"} {
			doc := fmt.Sprintf(`{"sandbox": {"kubernetes": {%s}}}`, frag)
			if where != "sandbox" {
				doc = fmt.Sprintf(`{"agents": {"a": {"sandbox": {"kubernetes": {%s}}}}}`, frag)
			}
			_, err := Parse([]byte(doc))
			if err == nil || !strings.Contains(err.Error(), where+"."+key) {
				t.Errorf("%s: error %v, want one naming %s.%s", doc, err, where, key)
			}
		}
	}
	for _, v := range []string{"soon", "-5m"} {
		if _, err := Parse([]byte(`{"sandbox": {"idleTimeout": "` + v + `"}}`)); err == nil || !strings.Contains(err.Error(), "sandbox.idleTimeout") {
			t.Errorf("idleTimeout %q: %v", v, err)
		}
	}
}

// TestKubeRequiredKeys: an agent whose resolved backend is kubernetes
// needs the gateway URL and the image, from either section.
func TestKubeRequiredKeys(t *testing.T) {
	_, err := Parse([]byte(`{"sandbox": {"mode": "all", "backend": "kubernetes"}}`))
	if err == nil || !strings.Contains(err.Error(), "gatewayUrl") || !strings.Contains(err.Error(), "image") {
		t.Fatalf("missing keys: %v", err)
	}
	_, err = Parse([]byte(`{"sandbox": {"mode": "all", "kubernetes": {"gatewayUrl": "http://gw:7878"}},
		"agents": {"k": {"sandbox": {"backend": "kubernetes"}}}}`))
	if err == nil || !strings.Contains(err.Error(), "agents.k.sandbox.backend is kubernetes for agent k") || strings.Contains(err.Error(), "gatewayUrl") {
		t.Fatalf("agent missing the image: %v", err)
	}
	c, err := Parse([]byte(`{"sandbox": {"mode": "all", "idleTimeout": "10m", "kubernetes": {"gatewayUrl": "http://gw:7878", "image": "img:1",
		"resources": {"requests": {"cpu": "1"}}, "nodeSelector": {"pool": "a"}}},
		"agents": {"k": {"sandbox": {"backend": "kubernetes", "idleTimeout": "0", "kubernetes": {"image": "other:2", "nodeSelector": {"pool": "b"}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.SandboxFor("k")
	if s.Backend != "kubernetes" || s.Kube.Image != "other:2" || s.Kube.GatewayURL != "http://gw:7878" || s.Kube.Requests["cpu"] != "1" ||
		s.Kube.NodeSelector["pool"] != "b" || s.IdleTimeout != 0 || s.Kube.StartupTimeout != DefaultKubeStartupTimeout || s.Kube.ConchPath != DefaultKubeConchPath {
		t.Fatalf("resolved: %+v", s)
	}
	if m := c.SandboxFor("main"); m.IdleTimeout != 10*time.Minute || m.Kube.Image != "img:1" {
		t.Fatalf("main: %+v", m)
	}
}
