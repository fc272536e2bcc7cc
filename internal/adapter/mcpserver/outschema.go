package mcpserver

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"

	"github.com/conchsh/conch/apitype"
)

// detailTypes lists, per tool, every details type its results carry as
// structured content. The output schema of a tool is generated from
// these types, so it cannot disagree with them; a test requires every
// *Details type of apitype and engine to be listed here (or excluded
// with a reason).
var detailTypes = map[string][]any{
	"exec": {apitype.ExecDetails{}, apitype.ApprovalDetails{}, apitype.ErrorDetails{}},
	"process": {apitype.ListDetails{}, apitype.PollDetails{}, apitype.LogDetails{}, apitype.WaitDetails{},
		apitype.SearchDetails{}, apitype.ScreenDetails{}, apitype.StatusDetails{}, apitype.ErrorDetails{}},
	"apply_patch": {apitype.PatchDetails{}, apitype.ErrorDetails{}},
}

// outFields are the members the output schemas describe, in this order:
// the ones a model acts on. Other members exist (see docs/tools.md) and
// are allowed; a member is listed for a tool only if one of its details
// types has it. A description "" keeps the member's type only.
var outFields = []struct{ name, desc string }{
	{"status", ""}, // per tool: statusDesc
	{"sessionId", ""},
	{"exitCode", ""},
	{"cursor", "Pass as since to read only later output."},
	{"outcome", ""},
	{"fired", ""},
	{"match", ""},
	{"error", "Set when the call failed: {code, message}."},
}

var statusDesc = map[string]string{
	"exec":        "completed, failed, running (in the background: use process), approval-pending or error.",
	"process":     "running, pending (approval), completed or failed.",
	"apply_patch": "completed or error.",
}

// outputSchema returns the output schema of tool: an object with the
// members of outFields that its details types have, each typed as the
// union of their JSON types, the members present in every type required.
func outputSchema(tool string) json.RawMessage {
	types := detailTypes[tool]
	props := map[string]any{}
	var order []string
	var required []string
	for _, f := range outFields {
		var kinds []string
		anyType, everywhere, somewhere := false, true, false
		for _, t := range types {
			k, always, ok := jsonKinds(reflect.TypeOf(t), f.name)
			if !ok {
				everywhere = false
				continue
			}
			somewhere = true
			if !always {
				everywhere = false
			}
			if k == nil {
				anyType = true
			}
			kinds = union(kinds, k)
		}
		if !somewhere {
			continue
		}
		p := map[string]any{}
		if !anyType {
			if len(kinds) == 1 {
				p["type"] = kinds[0]
			} else {
				p["type"] = kinds
			}
		}
		desc := f.desc
		if f.name == "status" {
			desc = statusDesc[tool]
		}
		if desc != "" {
			p["description"] = desc
		}
		props[f.name] = p
		order = append(order, f.name)
		if everywhere {
			required = append(required, f.name)
		}
	}
	// encoding/json sorts map keys; keep outFields' order for readers.
	var b strings.Builder
	b.WriteString(`{"type":"object","required":`)
	req, _ := json.Marshal(required)
	b.Write(req)
	b.WriteString(`,"properties":{`)
	for i, name := range order {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		v, _ := json.Marshal(props[name])
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString(`}}`)
	return json.RawMessage(b.String())
}

// jsonKinds returns the JSON types the member name of struct t can take
// (nil: any), whether it is always present (no omitempty), and whether t
// has the member at all.
func jsonKinds(t reflect.Type, name string) (kinds []string, always, ok bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		n, opts, _ := strings.Cut(tag, ",")
		if n != name || !f.IsExported() {
			continue
		}
		omit := strings.Contains(opts, "omitempty")
		ft := f.Type
		null := false
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
			null = !omit
		}
		k := kindOf(ft)
		if k == "" {
			return nil, !omit, true
		}
		kinds = []string{k}
		if ft.Kind() == reflect.Slice && !omit {
			null = true // a nil slice marshals as null
		}
		if null {
			kinds = append(kinds, "null")
		}
		return kinds, !omit, true
	}
	return nil, false, false
}

func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "" // interface: anything
}

func union(a, b []string) []string {
	for _, x := range b {
		found := false
		for _, y := range a {
			found = found || x == y
		}
		if !found {
			a = append(a, x)
		}
	}
	sort.Strings(a)
	return a
}
