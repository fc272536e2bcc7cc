package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sectionSign matches a section sign before a number, with the RFC that
// owns the section when one is named: RFCs are public, the design documents
// conch was built from are not.
var sectionSign = regexp.MustCompile(`(RFC \d+ )?§ ?\d`)

// unshipped matches the places the design documents lived and the sample
// material they were written from.
var unshipped = regexp.MustCompile(`shared/spec|\bseeds?/|\bthe seeds\b`)

// citationProblems returns what is wrong with one comment line of the Go
// file file (relative to root): a section number of a document that does
// not ship, a path into the design documents, or a markdown file that is
// not in the repository.
func citationProblems(root, file, line string) []string {
	var out []string
	for _, m := range sectionSign.FindAllStringSubmatch(line, -1) {
		if m[1] == "" {
			out = append(out, "cites a section number ("+m[0]+"…) of a document that does not ship: state the rule itself")
		}
	}
	if m := unshipped.FindString(line); m != "" {
		out = append(out, "cites "+m+", which does not ship: state the rule itself")
	}
	for _, name := range mdName.FindAllString(line, -1) {
		if strings.Contains(line, "://") {
			break // a URL names a file of another site
		}
		if !mdExists(root, file, name) {
			out = append(out, "names "+name+", which is not a file of the repository: state the rule itself, or name the doc that holds it")
		}
	}
	return out
}

// TestCommentsStandAlone: the comments of every Go file of the repository
// state their rules in their own words. A comment that cites a section of
// a design document that does not ship, or a markdown file that is not in
// the repository, tells a reader nothing; docs/ files and RFCs are fine.
func TestCommentsStandAlone(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("%v", err)
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, p)
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				first := fset.Position(c.Slash).Line
				for i, line := range strings.Split(c.Text, "\n") {
					for _, msg := range citationProblems(root, rel, line) {
						t.Errorf("%s:%d: %s", rel, first+i, msg)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("found only %d Go files: wrong working directory?", files)
	}
}

// TestCitationProblems shows that the check above catches each kind of
// citation and lets the ones a reader can follow through.
func TestCitationProblems(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	bad := []string{
		"// the error codes of interfaces.md §3.3",
		"// hosts.md § 7.5, forwarded",
		"// TestPinned covers §5.6.",
		"// see ../shared/spec/exec.md",
		"// as the seeds/ say",
		"// the seeds' documented behaviour",
		"// Exec runs the exec tool (exec.md).",
	}
	for _, line := range bad {
		if len(citationProblems(root, "engine/exec.go", line)) == 0 {
			t.Errorf("%q passes, want a problem", line)
		}
	}
	good := []string{
		"// compareUTF16 orders strings by UTF-16 code units (RFC 8785 §3.2.3)",
		"// the routes of docs/gateway.md",
		"// the approvals file (policy.md, in docs/)",
		"// bench/README.md says how",
		"// see https://example.com/notes.md",
		"// a session's Spec and its seed",
	}
	for _, line := range good {
		if p := citationProblems(root, "engine/exec.go", line); len(p) != 0 {
			t.Errorf("%q: %v, want none", line, p)
		}
	}
}
