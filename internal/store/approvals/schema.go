package approvals

import (
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// The approvals file is decoded by hand (unknown members are kept, not
// refused), so its schema is inferred from these wire types, which name
// the members the decoder reads; tests check that every member here is
// one the decoder consumes and every member the encoder writes is here.
type (
	fileWire struct {
		Version  int                   `json:"version" jsonschema:"the file format; must be 1"`
		Defaults *defaultsWire         `json:"defaults,omitempty" jsonschema:"the file-wide policy values"`
		Agents   map[string]*agentWire `json:"agents,omitempty" jsonschema:"per-agent values and allowlists, by agent id; \"*\" applies to every agent"`
	}
	defaultsWire struct {
		Security        *string `json:"security,omitempty"`
		Ask             *string `json:"ask,omitempty"`
		AskFallback     *string `json:"askFallback,omitempty"`
		AutoAllowSkills *bool   `json:"autoAllowSkills,omitempty" jsonschema:"kept for OpenClaw; no effect in conch"`
	}
	agentWire struct {
		Security    *string     `json:"security,omitempty"`
		Ask         *string     `json:"ask,omitempty"`
		AskFallback *string     `json:"askFallback,omitempty"`
		Allowlist   []entryWire `json:"allowlist,omitempty" jsonschema:"executables that run without approval in allowlist mode"`
	}
	entryWire struct {
		ID               string  `json:"id,omitempty" jsonschema:"a UUID; assigned on load when missing"`
		Pattern          string  `json:"pattern" jsonschema:"an executable path or glob"`
		LastUsedAt       float64 `json:"lastUsedAt,omitempty" jsonschema:"Unix milliseconds of the last hit"`
		LastUsedCommand  string  `json:"lastUsedCommand,omitempty" jsonschema:"the command text of the last hit"`
		LastResolvedPath string  `json:"lastResolvedPath,omitempty" jsonschema:"the resolved executable of the last hit"`
		Source           string  `json:"source,omitempty" jsonschema:"allow-always for entries conch persisted"`
	}
)

// Schema returns the JSON Schema (draft 2020-12) of exec-approvals.json.
//
// Members conch does not know are allowed at every level (the file is
// shared with OpenClaw, and conch keeps them). The enumerated values come
// from the lists the decoder checks. An allowlist element is a pattern
// string or an object with a pattern; the decoder drops other elements,
// and the schema flags them.
func Schema() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[fileWire](nil)
	if err != nil {
		return nil, fmt.Errorf("approvals schema: %w", err)
	}
	open := func(o *jsonschema.Schema) { o.AdditionalProperties = nil }
	policy := func(o *jsonschema.Schema) {
		open(o)
		for key, values := range map[string][]string{"security": securityValues, "ask": askValues, "askFallback": securityValues} {
			o.Properties[key].Enum = []any{nil, ""}
			for _, v := range values {
				o.Properties[key].Enum = append(o.Properties[key].Enum, v)
			}
		}
		o.Properties["security"].Description = "deny, allowlist or full"
		o.Properties["ask"].Description = "when calls need an approval: off, on-miss or always"
		o.Properties["askFallback"].Description = "what an unanswered approval does: deny, allowlist or full"
	}
	open(s)
	s.Properties["version"] = &jsonschema.Schema{Const: jsonschema.Ptr[any](1), Description: s.Properties["version"].Description}
	defaults := s.Properties["defaults"]
	policy(defaults)
	agent := s.Properties["agents"].AdditionalProperties
	policy(agent)
	list := agent.Properties["allowlist"]
	entry := list.Items
	open(entry)
	list.Items = &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
		{Type: "string", Pattern: `\S`, Description: "a pattern"},
		entry,
	}}
	entry.Properties["pattern"].Pattern = `\S`
	s.Schema = "https://json-schema.org/draft/2020-12/schema"
	s.Title = "conch exec-approvals.json"
	s.Description = "The exec approvals file ($CONCH_HOME/exec-approvals.json), compatible with OpenClaw's."
	return s, nil
}
