package patch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary text to the parser and, for every Update it
// accepts, runs the chunk matcher against a fixed file: neither may
// panic, and what parses must be well formed.
func FuzzParse(f *testing.F) {
	dirs, _ := os.ReadDir("testdata/cases")
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join("testdata/cases", d.Name(), "patch")); err == nil {
			f.Add(string(b))
		}
	}
	f.Add("*** Begin Patch\n*** Update File: a\n@@ x\n-a\n+b\n*** End of File\n*** End Patch")
	file := []byte("a\nb\n\nx\n  “quoted” — dash\r\nlast")
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Parse(in)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T", err)
			}
			if err.Error() == "" {
				t.Fatal("empty error text")
			}
			return
		}
		if len(p.Files) == 0 {
			t.Fatal("parsed a patch without operations")
		}
		for _, fl := range p.Files {
			if strings.TrimSpace(fl.Path) == "" || fl.Path != strings.TrimSpace(fl.Path) {
				t.Fatalf("bad path %q", fl.Path)
			}
			switch fl.Kind {
			case Update:
				if len(fl.Chunks) == 0 {
					t.Fatal("update without chunks")
				}
				out, err := updateContent(file, fl.Chunks, fl.Path)
				if err == nil && (len(out) == 0 || out[len(out)-1] != '\n') && len(out) != 0 {
					t.Fatal("result does not end with a newline")
				}
			case Add:
				if fl.Content != "" && !strings.HasSuffix(fl.Content, "\n") {
					t.Fatal("add content without final newline")
				}
			case Delete:
			default:
				t.Fatalf("kind %v", fl.Kind)
			}
		}
	})
}
