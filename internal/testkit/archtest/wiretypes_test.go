package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// answerPackages are the packages whose values become tool results and
// HTTP or MCP answers: the engine (tool results, notices, events), the
// operator use cases (doctor, sandbox status, exec defaults) and the
// adapters that encode them.
var answerPackages = []string{"engine", "internal/admin", "internal/adapter/httpapi", "internal/adapter/mcpserver", "internal/adapter/ui"}

// notWire lists the JSON-tagged struct types of answerPackages that are
// not conch's wire types, as "<dir>.<Type>", with the reason.
var notWire = map[string]string{
	"engine.AsciicastHeader": "the header of asciinema's asciicast v2 format (GET /v1/sessions/{id}/recording), a format conch writes but does not define",
	"engine.Event":           "the envelope of the event hub: internal/adapter/httpapi writes its type and data as SSE fields, never this struct",
}

// TestWireTypesLiveInApitype keeps every wire type in apitype, the one
// package the Go client (and any program) can import without the engine:
//   - an exported struct type with json tags defined in a package of answerPackages
//     is a wire type living outside apitype (unless notWire says why it is
//     not one); an alias of an apitype type is fine;
//   - the details object of every apitype.Result literal in the module
//     (Details: &T{…}, and r.Details = &T{…}) is a type of apitype.
func TestWireTypesLiveInApitype(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	used := map[string]bool{}
	for _, dir := range answerPackages {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(root, dir), func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			for _, f := range pkg.Files {
				for _, name := range jsonStructs(f) {
					key := filepath.Base(dir) + "." + name
					if _, ok := notWire[key]; ok {
						used[key] = true
						continue
					}
					t.Errorf("%s: %s is a JSON type outside apitype: move it there (the Go client cannot import %s), or add it to notWire with the reason it never goes on the wire", dir, name, dir)
				}
			}
		}
	}
	for k := range notWire {
		if !used[k] {
			t.Errorf("notWire lists %s, which no longer exists", k)
		}
	}
	n := 0
	eachFunc(t, func(rel string, fset *token.FileSet, fn *ast.FuncDecl) {
		inApitype := strings.HasPrefix(rel, "apitype/")
		ast.Inspect(fn.Body, func(node ast.Node) bool {
			var v ast.Expr
			switch x := node.(type) {
			case *ast.CompositeLit:
				if !isResultType(x.Type, inApitype) {
					return true
				}
				for _, el := range x.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Details" {
							v = kv.Value
						}
					}
				}
			case *ast.AssignStmt:
				for i, l := range x.Lhs {
					if sel, ok := l.(*ast.SelectorExpr); ok && sel.Sel.Name == "Details" && i < len(x.Rhs) {
						v = x.Rhs[i]
					}
				}
			}
			if u, ok := v.(*ast.UnaryExpr); ok && u.Op == token.AND {
				v = u.X
			}
			lit, ok := v.(*ast.CompositeLit)
			if !ok {
				return true
			}
			n++
			if !isApitype(lit.Type, inApitype) {
				t.Errorf("%s: a result's details are a %s: details types live in apitype", fset.Position(lit.Pos()), exprText(lit.Type))
			}
			return true
		})
	})
	if n < 20 {
		t.Fatalf("found only %d details literals: the walk is broken", n)
	}
}

// jsonStructs returns the names of the exported struct types defined in
// f (not aliases) that have a field with a json tag. Unexported ones are
// a package's private files (a session's state.json) or what an adapter
// reads of a protocol's framing, not answers.
func jsonStructs(f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Assign.IsValid() || !ts.Name.IsExported() {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		for _, fl := range st.Fields.List {
			if fl.Tag != nil && strings.Contains(fl.Tag.Value, `json:"`) {
				out = append(out, ts.Name.Name)
				break
			}
		}
		return true
	})
	return out
}

// isResultType reports whether e names apitype.Result.
func isResultType(e ast.Expr, inApitype bool) bool {
	if id, ok := e.(*ast.Ident); ok {
		return inApitype && id.Name == "Result"
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "apitype" && sel.Sel.Name == "Result"
}

// isApitype reports whether the type expression e names a type of apitype.
func isApitype(e ast.Expr, inApitype bool) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return inApitype
	case *ast.SelectorExpr:
		p, ok := x.X.(*ast.Ident)
		return ok && p.Name == "apitype"
	}
	return false
}

func exprText(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprText(x.X) + "." + x.Sel.Name
	case nil:
		return "value of an untyped literal"
	}
	return "composite literal"
}
