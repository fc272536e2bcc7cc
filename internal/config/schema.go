package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unicode"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema returns the JSON Schema (draft 2020-12) of config.json.
//
// It is inferred from the types Parse decodes into, so a key added to a
// type is in the schema; what the types cannot say (the allowed values of
// enumerated keys, agent ids, the sandbox limits) comes from the same
// variables validate checks. Enumerations match in any case, as Parse
// does, and list the lowercase spellings for editors to complete. The
// sections Parse keeps raw (server, log, tools.elevated,
// agents.<id>.elevated and .approvals, tools.exec.safeBinProfiles) accept
// any value, with the keys conch reads listed for completion.
func Schema() (*jsonschema.Schema, error) {
	types := map[reflect.Type]*jsonschema.Schema{
		// A raw section: any JSON value.
		reflect.TypeFor[json.RawMessage](): {},
	}
	// add infers T's schema with the types added so far, lets fix complete
	// it, and adds it: every later use of T (tools.exec and
	// agents.<id>.tools.exec, ...) gets the completed schema.
	add := func(t reflect.Type, fix func(*jsonschema.Schema)) error {
		s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: types})
		if err != nil {
			return err
		}
		optional(s)
		if fix != nil {
			fix(s)
		}
		for k, p := range s.Properties {
			if d, ok := descriptions[t.Name()+"."+k]; ok {
				p.Description = d
			}
		}
		types[t] = s
		return nil
	}
	steps := []struct {
		t   reflect.Type
		fix func(*jsonschema.Schema)
	}{
		{reflect.TypeFor[ApplyPatch](), nil},
		{reflect.TypeFor[SandboxPrune](), nil},
		{reflect.TypeFor[Exec](), func(s *jsonschema.Schema) {
			enum(s, "host", hostValues)
			enum(s, "security", securityValues)
			enum(s, "ask", askValues)
			enum(s, "askFallback", securityValues)
		}},
		{reflect.TypeFor[Tools](), func(s *jsonschema.Schema) {
			s.Properties["deny"].Items = enumSchema(toolNames, "a tool the agent may not use", true)
			s.Properties["elevated"].Properties = map[string]*jsonschema.Schema{
				"enabled": {Type: "boolean", Description: "false: elevated runs are not available (default true)"},
			}
		}},
		{reflect.TypeFor[SessionLimits](), func(s *jsonschema.Schema) {
			s.Properties["memoryBytes"].AnyOf = []*jsonschema.Schema{{Const: jsonschema.Ptr[any](0.0)}, {Minimum: jsonschema.Ptr(float64(minMemoryBytes))}}
			s.Properties["pids"].Minimum = jsonschema.Ptr(0.0)
			s.Properties["cpuWeight"].Minimum = jsonschema.Ptr(0.0)
			s.Properties["cpuWeight"].Maximum = jsonschema.Ptr(float64(maxCPUWeight))
		}},
		{reflect.TypeFor[SandboxLimits](), func(s *jsonschema.Schema) {
			s.Properties["memoryBytes"].Minimum = jsonschema.Ptr(float64(minMemoryBytes))
			s.Properties["pids"].Minimum = jsonschema.Ptr(0.0)
			s.Properties["cpus"].Minimum = jsonschema.Ptr(0.0)
			s.Properties["cpus"].Maximum = jsonschema.Ptr(float64(maxCPUs))
		}},
		{reflect.TypeFor[SandboxBwrap](), func(s *jsonschema.Schema) {
			bind := &jsonschema.Schema{Type: "string", Pattern: bindPattern, Description: "SRC or SRC:DST, absolute paths"}
			s.Properties["roBinds"].Items = bind
			s.Properties["binds"].Items = bind
		}},
		{reflect.TypeFor[SandboxDocker](), func(s *jsonschema.Schema) {
			s.Properties["binds"].Items = &jsonschema.Schema{Type: "string", Pattern: dockerBindPattern, Description: "SRC or SRC:DST, absolute paths, optionally :ro or :rw"}
		}},
		{reflect.TypeFor[KubeToleration](), kubeTolerationSchema},
		{reflect.TypeFor[KubeResources](), kubeResourcesSchema},
		{reflect.TypeFor[SandboxKubernetes](), kubeSchema},
		{reflect.TypeFor[Sandbox](), func(s *jsonschema.Schema) {
			enum(s, "mode", sandboxModes)
			enum(s, "backend", sandboxBackends)
			enum(s, "scope", sandboxScopes)
			enum(s, "workspaceAccess", workspaceAccessValues)
			enum(s, "network", sandboxNetworks)
			enum(s, "gitAccess", gitAccessValues)
			s.Properties["workspacePath"].Enum = anyOf(append([]string{""}, workspacePaths...))
			s.Properties["runAs"].Pattern = `^[0-9]+(:[0-9]+)?$`
			s.Properties["idleTimeout"].Pattern = durationPattern
			s.Properties["protectPaths"].Items = &jsonschema.Schema{
				Type: "string", Pattern: "^[^/]", Not: &jsonschema.Schema{Pattern: `(^|/)\.\.(/|$)`},
				Description: "a relative path inside the workspace",
			}
			s.Properties["env"].PropertyNames = &jsonschema.Schema{Pattern: `^[A-Za-z_][A-Za-z0-9_]*$`}
		}},
		{reflect.TypeFor[Quotas](), nil},
		{reflect.TypeFor[Sessions](), nil},
		{reflect.TypeFor[MCP](), nil},
		{reflect.TypeFor[ApprovalSettings](), nil},
		{reflect.TypeFor[LedgerForward](), func(s *jsonschema.Schema) {
			enum(s, "network", forwardNetworkValues)
		}},
		{reflect.TypeFor[LedgerSettings](), func(s *jsonschema.Schema) {
			enum(s, "scope", ledgerScopeValues)
		}},
		{reflect.TypeFor[AgentConfig](), func(s *jsonschema.Schema) {
			s.Properties["elevated"].Properties = map[string]*jsonschema.Schema{
				"allow":   {Type: "boolean", Description: "the agent may request elevated runs (default false)"},
				"default": enumSchema([]string{"off", "ask", "full"}, "elevated level of the agent's runs: off (default), ask, full", false),
			}
			s.Properties["approvals"].Properties = map[string]*jsonschema.Schema{
				"elicitation": {Type: "boolean", Description: "false: never ask this agent's human at the MCP client"},
			}
		}},
		{reflect.TypeFor[Config](), func(s *jsonschema.Schema) {
			s.Properties["agents"].PropertyNames = &jsonschema.Schema{Pattern: agentID().String()}
			s.Properties["server"].Properties = map[string]*jsonschema.Schema{
				"allowedHosts":   {Type: "array", Items: &jsonschema.Schema{Type: "string"}, Description: "more Host names conch serve accepts"},
				"allowedOrigins": {Type: "array", Items: &jsonschema.Schema{Type: "string"}, Description: "more Origins conch serve accepts"},
				"ui":             {Type: "boolean", Description: "false: no control UI, like conch serve --no-ui"},
			}
		}},
	}
	for _, st := range steps {
		if err := add(st.t, st.fix); err != nil {
			return nil, fmt.Errorf("config schema: %w", err)
		}
	}
	s := types[reflect.TypeFor[Config]()].CloneSchemas()
	s.Schema = "https://json-schema.org/draft/2020-12/schema"
	s.Title = "conch config.json"
	s.Description = "The configuration of conch ($CONCH_HOME/config.json). Unknown keys are errors."
	return s, nil
}

// optional drops the "required" that inference gives fields without
// omitempty, in s and all it contains: Parse requires no key.
func optional(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.Required = nil
	for _, p := range s.Properties {
		optional(p)
	}
	optional(s.Items)
	optional(s.AdditionalProperties)
}

// enum makes s's property key one of values in any case, or "" (unset),
// as oneOf checks.
func enum(s *jsonschema.Schema, key string, values []string) {
	s.Properties[key] = enumSchema(append([]string{""}, values...), "", false)
}

// enumSchema is a string that is one of values, compared without regard
// to case (and, with trim, to surrounding space). The lowercase values
// are an enum, for editors to complete; the other spellings match a
// pattern.
func enumSchema(values []string, desc string, trim bool) *jsonschema.Schema {
	var alts []string
	for _, v := range values {
		var b strings.Builder
		for _, r := range v {
			if u, l := unicode.ToUpper(r), unicode.ToLower(r); u != l {
				fmt.Fprintf(&b, "[%c%c]", l, u)
			} else {
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		alts = append(alts, b.String())
	}
	space := ""
	if trim {
		space = `\s*`
	}
	return &jsonschema.Schema{Type: "string", Description: desc, AnyOf: []*jsonschema.Schema{
		{Enum: anyOf(values)},
		{Pattern: "^" + space + "(?:" + strings.Join(alts, "|") + ")" + space + "$"},
	}}
}

func anyOf(values []string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}
