package archtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsJSONBlocks: every ```json block of the user docs is valid JSON,
// so that a configuration copied from them (a client's MCP settings,
// config.json, the approvals file) loads as written.
func TestDocsJSONBlocks(t *testing.T) {
	root := "../../.."
	block := regexp.MustCompile("(?ms)^```json\n(.*?)^```")
	n := 0
	for _, f := range userDocs(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllSubmatchIndex(b, -1) {
			n++
			text := b[m[2]:m[3]]
			line := 1 + strings.Count(string(b[:m[2]]), "\n")
			dec := json.NewDecoder(strings.NewReader(string(text)))
			for {
				var v any
				err := dec.Decode(&v)
				if err != nil {
					if err.Error() != "EOF" {
						t.Errorf("%s:%d: the json block does not parse: %v", f, line, err)
					}
					break
				}
			}
		}
	}
	if n < 8 {
		t.Fatalf("found only %d json blocks", n)
	}
}
