package state

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/google/jsonschema-go/jsonschema"
)

var updateSchemas = flag.Bool("update", false, "rewrite docs/schema/*.schema.json from conch config schema")

// schemaFiles are the published schemas, by the argument of
// `conch config schema`.
var schemaFiles = map[string]string{
	"config":    "../../docs/schema/config.schema.json",
	"approvals": "../../docs/schema/exec-approvals.schema.json",
}

// TestConfigSchemaFiles: the schemas in docs/schema are what the binary's
// `conch config schema` prints (go test ./e2e/state -run
// TestConfigSchemaFiles -update rewrites them).
func TestConfigSchemaFiles(t *testing.T) {
	for which, file := range schemaFiles {
		out, stderr, code := e2etest.RunCLI(t, nil, "config", "schema", which)
		if code != e2etest.ExitOK || stderr != "" {
			t.Fatalf("conch config schema %s: exit %d: %s", which, code, stderr)
		}
		if *updateSchemas {
			if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if out != string(want) {
			t.Errorf("%s differs from `conch config schema %s`: run go test ./e2e/state -run TestConfigSchemaFiles -update", file, which)
		}
	}
	def, _, _ := e2etest.RunCLI(t, nil, "config", "schema")
	if cfg, _, _ := e2etest.RunCLI(t, nil, "config", "schema", "config"); def != cfg {
		t.Error("conch config schema does not default to config")
	}
	for _, args := range [][]string{{"config"}, {"config", "bogus"}, {"config", "schema", "bogus"}, {"config", "schema", "config", "approvals"}} {
		if _, stderr, code := e2etest.RunCLI(t, nil, args...); code != e2etest.ExitUsage || !strings.Contains(stderr, "config") {
			t.Errorf("conch %v: exit %d, want %d: %s", args, code, e2etest.ExitUsage, stderr)
		}
	}
}

// TestConfigSchemaTestConfigs: every JSON object written as a literal in
// this package's tests (the configurations the end-to-end tests run
// with, and every other literal) is valid for the published
// config.schema.json exactly when conch accepts it as config.json; the
// one rule the schema cannot state, maxRetained >= maxRunning, is left
// out.
func TestConfigSchemaTestConfigs(t *testing.T) {
	b, err := os.ReadFile(schemaFiles["config"])
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The configurations of every end-to-end package and of the harness.
	files, _ := filepath.Glob(filepath.Join("..", "*", "*_test.go"))
	harness, _ := filepath.Glob(filepath.Join("..", "..", "internal", "testkit", "e2etest", "*.go"))
	files = append(files, harness...)
	lit := regexp.MustCompile("`(\\{[^`]*\\})`")
	valid, n := 0, 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lit.FindAllSubmatch(src, -1) {
			var v any
			if json.Unmarshal(m[1], &v) != nil || bytes.Contains(m[1], []byte("maxRetained")) {
				continue
			}
			n++
			_, perr := config.Parse(m[1])
			serr := rs.Validate(v)
			if perr == nil {
				valid++
			}
			if (perr == nil) != (serr == nil) {
				t.Errorf("%s: %s: conch says %v, the schema says %v", f, m[1], perr, serr)
			}
		}
	}
	if valid < 20 {
		t.Fatalf("only %d configurations found (%d literals)", valid, n)
	}
	t.Logf("%d JSON literals, %d valid configurations", n, valid)
}
