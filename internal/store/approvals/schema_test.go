package approvals

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

func approvalsSchema(t *testing.T) (*jsonschema.Schema, *jsonschema.Resolved) {
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

func validate(rs *jsonschema.Resolved, doc []byte) error {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return err
	}
	return rs.Validate(v)
}

// walk calls f with every property path of s; a map's members are visited
// under the key "a", an allowlist's elements under "0" (the object form).
func walk(s *jsonschema.Schema, path []string, f func([]string, *jsonschema.Schema)) {
	f(path, s)
	for k, p := range s.Properties {
		walk(p, append(slices.Clip(path), k), f)
	}
	if ap := s.AdditionalProperties; ap != nil && len(s.Properties) == 0 {
		walk(ap, append(slices.Clip(path), "a"), f)
	}
	if s.Items != nil {
		for _, alt := range s.Items.AnyOf {
			if alt.Type == "object" {
				walk(alt, append(slices.Clip(path), "0"), f)
			}
		}
	}
}

// nest returns a version-1 file that holds v at path ("0" is an array
// element).
func nest(path []string, v string) []byte {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == "0" {
			v = "[" + v + "]"
			continue
		}
		k, _ := json.Marshal(path[i])
		v = "{" + string(k) + ":" + v + "}"
	}
	if len(path) > 0 && path[0] == "version" {
		return []byte(v)
	}
	return []byte(`{"version":1,` + strings.TrimPrefix(v, "{"))
}

// TestSchemaValidFiles: files Parse accepts validate: OpenClaw's, the
// documentation's example, and what conch writes.
func TestSchemaValidFiles(t *testing.T) {
	_, rs := approvalsSchema(t)
	docs := []string{openclawFile, `{"version":1}`, `{"$schema":"./exec-approvals.schema.json","version":1}`, `{"version":1.0,"defaults":null,"agents":{"x":null}}`,
		`{"version":1,"defaults":{"security":null,"ask":""},"agents":{"main":{"allowlist":["/bin/ls"]}}}`}
	b, err := os.ReadFile("../../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], `"version"`) {
			docs = append(docs, m[1])
		}
	}
	if len(docs) < 5 {
		t.Fatal("no approvals file in docs/policy.md")
	}
	for _, doc := range docs {
		f, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("Parse refuses %s: %v", doc, err)
			continue
		}
		if err := validate(rs, []byte(doc)); err != nil {
			t.Errorf("the schema refuses %s: %v", doc, err)
		}
		enc, err := f.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(rs, enc); err != nil {
			t.Errorf("the schema refuses what conch writes, %s: %v", enc, err)
		}
	}
}

// TestSchemaNamesWhatTheCodeReadsAndWrites ties the schema's members to
// the hand-written decoder and encoder: a file with every member of the
// schema set leaves nothing unknown to the decoder (Extra), and what the
// encoder writes of a file with every field set validates against the
// schema with unknown members forbidden.
func TestSchemaNamesWhatTheCodeReadsAndWrites(t *testing.T) {
	s, _ := approvalsSchema(t)
	sample := func(p *jsonschema.Schema) string {
		switch {
		case p.Const != nil:
			return "1"
		case len(p.Enum) > 0:
			b, _ := json.Marshal(p.Enum[len(p.Enum)-1])
			return string(b)
		case slices.Contains(p.Types, "boolean") || p.Type == "boolean":
			return "true"
		case p.Type == "number":
			return "5"
		case p.Type == "string":
			return `"/usr/bin/x"`
		}
		return ""
	}
	n := 0
	walk(s, nil, func(path []string, p *jsonschema.Schema) {
		v := sample(p)
		if v == "" {
			return
		}
		doc := nest(path, v)
		if i := slices.Index(path, "0"); i >= 0 && path[len(path)-1] != "pattern" {
			// an entry member: the entry needs its pattern too
			doc = nest(path[:i+1], `{"pattern":"/bin/p",`+strings.TrimPrefix(string(nest(path[i+1:], v)), `{"version":1,`))
		}
		f, err := Parse(doc)
		if err != nil {
			t.Errorf("Parse refuses %s: %v", doc, err)
			return
		}
		n++
		extra := len(f.Extra) + len(f.Defaults.Extra)
		for _, a := range f.Agents {
			extra += len(a.Extra)
			for _, e := range a.Allowlist {
				extra += len(e.Extra)
			}
		}
		if extra != 0 {
			t.Errorf("the schema names %s, which the decoder does not read: %s", strings.Join(path, "."), doc)
		}
	})
	if n < 14 {
		t.Fatalf("only %d members checked", n)
	}

	// The encoder's side: every field set, unknown members forbidden.
	strict := s.CloneSchemas()
	walk(strict, nil, func(_ []string, p *jsonschema.Schema) {
		if len(p.Properties) > 0 {
			p.AdditionalProperties = &jsonschema.Schema{Not: &jsonschema.Schema{}}
		}
	})
	rs, err := strict.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	full := &File{Version: 1,
		Defaults: Defaults{Security: "full", Ask: "always", AskFallback: "deny", AutoAllowSkills: &yes},
		Agents: map[string]*Agent{"main": {Security: "allowlist", Ask: "off", AskFallback: "full", Allowlist: []Entry{{
			ID: "id", Pattern: "/bin/ls", LastUsedAt: 1, LastUsedCommand: "ls", LastResolvedPath: "/bin/ls", Source: "allow-always"}}}}}
	enc, err := full.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(rs, enc); err != nil {
		t.Errorf("conch writes a member the schema lacks: %s: %v", enc, err)
	}
}

// TestSchemaRejectsWhatParseRejects generates, for every member of the
// schema, files with a value of every JSON type and wrong values: each
// one Parse refuses, the schema refuses too.
func TestSchemaRejectsWhatParseRejects(t *testing.T) {
	s, rs := approvalsSchema(t)
	values := []string{`"x"`, `""`, `"ful"`, `1.5`, `2`, `1`, `true`, `[]`, `["x"]`, `[1]`, `{}`, `{"x":1}`, `null`}
	var docs [][]byte
	walk(s, nil, func(path []string, p *jsonschema.Schema) {
		for _, v := range values {
			if len(path) > 0 {
				docs = append(docs, nest(path, v))
			}
		}
	})
	docs = append(docs, []byte(`[]`), []byte(`null`), []byte(`{}`), []byte(`"x"`), []byte(`{"version":"1"}`))
	refused := 0
	for _, doc := range docs {
		if _, err := Parse(doc); err == nil {
			continue
		}
		refused++
		if err := validate(rs, doc); err == nil {
			t.Errorf("Parse refuses %s, the schema accepts it", doc)
		}
	}
	if refused < 50 {
		t.Fatalf("only %d of %d generated files are refused by Parse", refused, len(docs))
	}
}
