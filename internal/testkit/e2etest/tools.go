package e2etest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outputSchemas lists the tools and resolves their output schemas; a
// tool without one, or one that does not resolve, fails the test.
func outputSchemas(t testing.TB, cs *mcp.ClientSession) map[string]*jsonschema.Resolved {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	out := map[string]*jsonschema.Resolved{}
	for _, tl := range res.Tools {
		if tl.OutputSchema == nil {
			t.Fatalf("tool %s has no outputSchema", tl.Name)
		}
		b, _ := json.Marshal(tl.OutputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("outputSchema of %s: %v", tl.Name, err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("outputSchema of %s does not resolve: %v", tl.Name, err)
		}
		out[tl.Name] = r
	}
	return out
}

// checkOutput validates the structured content of one result against its
// tool's output schema, as clients that validate (the TypeScript SDK) do.
// Every result of every test of this package passes through here.
func checkOutput(t testing.TB, schemas map[string]*jsonschema.Resolved, tool string, args map[string]any, structured []byte) {
	t.Helper()
	r := schemas[tool]
	if r == nil {
		return
	}
	var v any
	if err := json.Unmarshal(structured, &v); err != nil || v == nil {
		t.Errorf("%s %v: no structured content (%s)", tool, args, structured)
		return
	}
	if err := r.Validate(v); err != nil {
		t.Errorf("%s %v: structured content does not match the outputSchema: %v\n%s", tool, args, err, structured)
	}
}
