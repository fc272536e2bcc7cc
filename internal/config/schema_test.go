package config

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

func resolvedSchema(t *testing.T) (*jsonschema.Schema, *jsonschema.Resolved) {
	t.Helper()
	s, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, rs
}

func schemaValidates(rs *jsonschema.Resolved, doc string) error {
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return err
	}
	return rs.Validate(v)
}

// fullConfig sets every key of the schema (agents.build every key of an
// agent): TestSchemaFullConfigCoversSchema keeps it complete.
const fullConfig = `{
  "$schema": "./config.schema.json",
  "tools": {
    "exec": {
      "host": "gateway", "security": "allowlist", "ask": "on-miss", "node": "build-box",
      "askFallback": "deny", "nonInteractiveEnv": {"PAGER": "cat"}, "promptIdleMs": 1500,
      "pathPrepend": ["~/.local/bin"], "safeBins": ["cut", "wc"], "safeBinTrustedDirs": ["/opt/bin"],
      "safeBinProfiles": {"sort": {"maxPositional": 0}}, "strictInlineEval": true,
      "backgroundMs": 10000, "timeoutSec": 600, "backgroundTimeoutSec": 7200, "killGraceMs": 2000,
      "pty": false, "cleanupMs": 1800000, "idempotencyTtlMs": 600000, "notifyOnExit": true,
      "notifyOnExitEmptySuccess": false, "approvalRunningNoticeMs": 10000, "maxOutputChars": 16000,
      "pendingMaxOutputChars": 16000, "journalMaxBytes": 67108864, "journalHeadBytes": 1048576,
      "applyPatch": {"enabled": true, "workspaceOnly": true, "allowModels": []}
    },
    "deny": ["apply_patch"],
    "elevated": {"enabled": false}
  },
  "agents": {
    "build": {
      "workspace": "/srv/build",
      "tools": {"exec": {"pty": true, "security": "FULL"}, "deny": ["process"]},
      "elevated": {"allow": true, "default": "ask"},
      "sandbox": {"mode": "all"},
      "quotas": {"maxRunning": 8, "maxRetained": 16, "session": {"memoryBytes": 2147483648}},
      "approvals": {"elicitation": false}
    }
  },
  "sessions": {"survive": true, "diskReserveBytes": 8388608},
  "quotas": {"maxRunning": 256, "maxRetained": 512, "journalBytes": 1073741824, "execPerSecond": 50,
    "execBurst": 200, "minRetainAgeMs": 3600000, "session": {"memoryBytes": 0, "pids": 4096, "cpuWeight": 100}},
  "server": {"allowedHosts": ["conch.internal"], "allowedOrigins": ["https://conch.internal"], "ui": true},
  "sandbox": {
    "mode": "non-main", "backend": "bwrap", "scope": "agent", "workspaceAccess": "rw",
    "workspacePath": "/workspace", "network": "none", "protectPaths": [".git/hooks"], "gitAccess": "ro",
    "runAs": "65534:65534", "env": {"LANG": "C.UTF-8"},
    "bwrap": {"path": "bwrap", "roBinds": ["/opt"], "binds": ["/srv/cache:/cache"]},
    "limits": {"memoryBytes": 1073741824, "pids": 512, "cpus": 2},
    "docker": {"image": "debian:bookworm-slim", "network": "bridge", "env": {"A": "1"}, "binds": ["/srv/data:/data:ro"],
      "ulimits": ["nofile=1024:1024"], "setupCommand": "apt-get update",
      "prune": {"idleHours": 24, "maxAgeDays": 7}},
    "idleTimeout": "30m",
    "kubernetes": {"kubeconfig": "/etc/conch/kubeconfig", "context": "prod", "namespace": "agents",
      "gatewayUrl": "http://conch.agents.svc:7878", "image": "ghcr.io/example/conch-sandbox:1", "imagePullPolicy": "IfNotPresent",
      "conchPath": "/usr/local/bin/conch", "serviceAccountName": "conch-sandbox", "runtimeClassName": "gvisor",
      "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
      "nodeSelector": {"pool": "sandboxes"},
      "tolerations": [{"key": "sandbox", "operator": "Equal", "value": "true", "effect": "NoExecute", "tolerationSeconds": 60}],
      "networkPolicy": {"policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]},
      "sandboxCrd": "auto", "startupTimeout": "2m", "nodeLostGrace": "30s", "warmPool": 2}
  },
  "approvals": {"timeoutMs": 120000, "elicitation": true, "failFastWithoutApprover": false},
  "ledger": {"scope": "all", "rotateBytes": 67108864,
    "forward": {"network": "udp", "address": "127.0.0.1:514", "tag": "conch-ledger"}},
  "log": {"anything": "goes"},
  "mcp": {"fullDetails": false, "inlineEvents": true}
}`

// docExample is the configuration under "## Example" in docs/configure.md.
func docExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/configure.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Example\n.*?```json\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/configure.md: no json block under ## Example")
	}
	return string(m[1])
}

// TestSchemaValidConfigs: configurations Parse accepts validate against
// the schema: every key set, the documentation's example, a "$schema" key,
// any case in enumerations.
func TestSchemaValidConfigs(t *testing.T) {
	_, rs := resolvedSchema(t)
	for _, doc := range []string{
		`{}`,
		`{"$schema": "https://example.com/config.schema.json"}`,
		fullConfig,
		docExample(t),
		`{"tools": {"exec": {"host": "Gateway", "ask": "ON-MISS", "security": ""}, "deny": [" Exec "]}}`,
		`{"sandbox": {"mode": "Non-Main", "backend": "LANDLOCK"}, "ledger": {"scope": "Gated"}}`,
		`{"server": 5, "log": null, "tools": {"elevated": "anything"}}`,
		`{"agents": {"main": {}, "a_b-9": {"tools": {"exec": {"timeoutSec": 0.5}}}}}`,
	} {
		if _, err := Parse([]byte(doc)); err != nil {
			t.Errorf("Parse refuses %s: %v", doc, err)
			continue
		}
		if err := schemaValidates(rs, doc); err != nil {
			t.Errorf("the schema refuses %s: %v", doc, err)
		}
	}
}

// TestSchemaDollarSchemaKey: editors need a "$schema" key; Parse accepts
// it (it refuses every other unknown key).
func TestSchemaDollarSchemaKey(t *testing.T) {
	if _, err := Parse([]byte(`{"$schema": "./docs/schema/config.schema.json"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte(`{"$schemas": "x"}`)); err == nil {
		t.Fatal("an unknown key is accepted")
	}
}

// schemaPaths calls f with every property path of s; a map's members are
// visited under the key "a".
func schemaPaths(s *jsonschema.Schema, path []string, f func([]string, *jsonschema.Schema)) {
	f(path, s)
	for k, p := range s.Properties {
		schemaPaths(p, append(slices.Clip(path), k), f)
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Not == nil && len(s.Properties) == 0 {
		schemaPaths(ap, append(slices.Clip(path), "a"), f)
	}
}

// nest returns the document that holds v at path.
func nest(path []string, v json.RawMessage) string {
	s := string(v)
	for i := len(path) - 1; i >= 0; i-- {
		k, _ := json.Marshal(path[i])
		s = "{" + string(k) + ":" + s + "}"
	}
	return s
}

// TestSchemaRejectsWhatParseRejects generates, for every key of the
// schema, documents with a value of every JSON type and a few wrong
// values, plus an unknown key in every object: each one Parse refuses,
// the schema refuses too.
func TestSchemaRejectsWhatParseRejects(t *testing.T) {
	s, rs := resolvedSchema(t)
	values := []string{`"x"`, `""`, `"bogus"`, `1.5`, `7`, `-1`, `0`, `true`, `[]`, `["x"]`, `[1]`, `[""]`, `{}`, `{"x":1}`, `{"a":{"b":1}}`, `null`, `["/a:b"]`, `["../x"]`, `["a/../../b"]`, `["/a:/b:ro"]`}
	var docs []string
	schemaPaths(s, nil, func(path []string, p *jsonschema.Schema) {
		if len(path) > 0 {
			for _, v := range values {
				docs = append(docs, nest(path, json.RawMessage(v)))
			}
		}
		if p.Type == "object" || slices.Contains(p.Types, "object") {
			docs = append(docs, nest(path, json.RawMessage(`{"bogusKey":1}`)))
		}
	})
	refused := 0
	for _, doc := range docs {
		if _, err := Parse([]byte(doc)); err == nil {
			continue
		}
		// maxRetained must be at least maxRunning: a rule between two
		// keys, which the schema does not express (docs/configure.md).
		if strings.Contains(doc, `"maxRetained":7}`) {
			continue
		}
		refused++
		if err := schemaValidates(rs, doc); err == nil {
			t.Errorf("Parse refuses %s, the schema accepts it", doc)
		}
	}
	if refused < 500 {
		t.Fatalf("only %d of %d generated documents are refused by Parse: the generator is broken", refused, len(docs))
	}
	t.Logf("%d documents, %d refused by Parse and the schema", len(docs), refused)
}

// TestSchemaFullConfigCoversSchema: fullConfig sets every key of the
// schema outside agents, and every key of an agent, so that
// TestSchemaValidConfigs checks them all.
func TestSchemaFullConfigCoversSchema(t *testing.T) {
	s, _ := resolvedSchema(t)
	var full any
	if err := json.Unmarshal([]byte(fullConfig), &full); err != nil {
		t.Fatal(err)
	}
	has := func(path []string) bool {
		v := full
		for _, k := range path {
			m, ok := v.(map[string]any)
			if !ok {
				return false
			}
			if v, ok = m[k]; !ok {
				return false
			}
		}
		return true
	}
	schemaPaths(s, nil, func(path []string, p *jsonschema.Schema) {
		switch {
		case len(path) == 0, path[len(path)-1] == "a":
		case path[0] == "agents" && len(path) == 1:
		case path[0] == "agents" && len(path) > 3:
		case path[0] == "agents":
			if !has(append([]string{"agents", "build"}, path[2:]...)) {
				t.Errorf("fullConfig lacks agents.build.%s", strings.Join(path[2:], "."))
			}
		case !has(path):
			t.Errorf("fullConfig lacks %s", strings.Join(path, "."))
		}
	})
}

// TestSchemaDocumentedKeys: every key in the tables of docs/configure.md
// is a key of the schema.
func TestSchemaDocumentedKeys(t *testing.T) {
	s, _ := resolvedSchema(t)
	b, err := os.ReadFile("../../docs/configure.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-zA-Z.<>*]+)`").FindAllStringSubmatch(string(b), -1) {
		key := m[1]
		if strings.HasSuffix(key, ".*") || !strings.Contains(key, ".") {
			continue
		}
		n++
		p := s
		for _, k := range strings.Split(key, ".") {
			if k == "<id>" {
				p = p.AdditionalProperties
				continue
			}
			if p = p.Properties[k]; p == nil {
				t.Errorf("docs/configure.md documents %s, which the schema lacks", key)
				break
			}
		}
	}
	if n < 40 {
		t.Fatalf("found only %d documented keys", n)
	}
}

// TestSchemaDescribesEveryKey: every key of every section has a
// description (a key added to a type needs one in descriptions), and
// every description is used.
func TestSchemaDescribesEveryKey(t *testing.T) {
	s, _ := resolvedSchema(t)
	seen := 0
	schemaPaths(s, nil, func(path []string, p *jsonschema.Schema) {
		if len(path) == 0 || path[len(path)-1] == "a" {
			return
		}
		seen++
		if p.Description == "" {
			t.Errorf("%s has no description", strings.Join(path, "."))
		}
	})
	if seen < 100 {
		t.Fatalf("only %d keys", seen)
	}
	for key := range descriptions {
		typ, name, _ := strings.Cut(key, ".")
		found := false
		schemaPaths(s, nil, func(path []string, p *jsonschema.Schema) {
			if len(path) > 0 && path[len(path)-1] == name && p.Description == descriptions[key] {
				found = true
			}
		})
		if !found {
			t.Errorf("descriptions[%q] (type %s) is not used", key, typ)
		}
	}
}
