package mcpserver

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestEveryDetailsTypeHasATool finds every struct type named *Details in
// apitype and engine (the details objects of tool results) and requires
// it in detailTypes, so a new result shape cannot escape the generated
// output schemas.
func TestEveryDetailsTypeHasATool(t *testing.T) {
	listed := map[string]bool{}
	for _, ts := range detailTypes {
		for _, v := range ts {
			rt := reflect.TypeOf(v)
			listed[filepath.Base(rt.PkgPath())+"."+rt.Name()] = true
		}
	}
	found := 0
	for _, dir := range []string{"../../../apitype", "../../../engine"} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for name, pkg := range pkgs {
			for _, f := range pkg.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					ts, ok := n.(*ast.TypeSpec)
					if !ok || !strings.HasSuffix(ts.Name.Name, "Details") {
						return true
					}
					if _, ok := ts.Type.(*ast.StructType); !ok {
						return true
					}
					found++
					if !listed[name+"."+ts.Name.Name] {
						t.Errorf("%s.%s is not in detailTypes: its results would not match any output schema", name, ts.Name.Name)
					}
					return true
				})
			}
		}
	}
	if found < 10 {
		t.Fatalf("found only %d details types", found)
	}
}

// TestDetailsMatchOutputSchema generates values of every details type
// (zero, and every pointer, slice and map filled in) and validates them
// against the output schema of each tool that returns it.
func TestDetailsMatchOutputSchema(t *testing.T) {
	for tool, types := range detailTypes {
		raw := outputSchema(tool)
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v\n%s", tool, err, raw)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		for _, v := range types {
			rt := reflect.TypeOf(v)
			for i, val := range []reflect.Value{reflect.New(rt), filled(rt, 0)} {
				b, _ := json.Marshal(val.Interface())
				var inst any
				json.Unmarshal(b, &inst)
				if err := rs.Validate(inst); err != nil {
					t.Errorf("%s %s (value %d) does not match: %v\n%s", tool, rt.Name(), i, err, b)
				}
			}
		}
	}
}

// filled returns a pointer to a value of t with every pointer, slice and
// map set (one element), recursively to a small depth.
func filled(t reflect.Type, depth int) reflect.Value {
	p := reflect.New(t)
	v := p.Elem()
	if depth > 3 {
		return p
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if !t.Field(i).IsExported() {
				continue
			}
			v.Field(i).Set(filled(t.Field(i).Type, depth+1).Elem())
		}
	case reflect.Pointer:
		v.Set(filled(t.Elem(), depth+1))
	case reflect.Slice:
		s := reflect.MakeSlice(t, 1, 1)
		s.Index(0).Set(filled(t.Elem(), depth+1).Elem())
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(t)
		m.SetMapIndex(filled(t.Key(), depth+1).Elem(), filled(t.Elem(), depth+1).Elem())
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	}
	return p
}
