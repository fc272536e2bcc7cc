package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// userDocs lists README.md, docs/*.md and the other top-level READMEs,
// relative to the repository root.
func userDocs(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	for _, pat := range []string{"docs/*.md", "*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			files = append(files, rel)
		}
	}
	if len(files) < 5 {
		t.Fatalf("found only %v: wrong working directory?", files)
	}
	return files
}

// designDocs are the names of the design documents conch was built from.
// They do not ship, so the user docs must state their rules instead of
// citing them.
var designDocs = []string{"hosts.md", "exec.md", "process.md", "interfaces.md", "apply-patch.md", "policy.md"}

// notStandAlone matches phrases that only make sense with documents or
// history a reader of the repository does not have: section signs, "the
// specification" or "the spec" (a session's launch data is "the session
// spec"), numbered work sessions and issues.
var notStandAlone = regexp.MustCompile(`(?i)§|\bspecification\b|\bthe spec\b|\b(?:session|issue) #?\d+\b`)

// issueRef matches a bare issue or pull-request number ("#1234"). The
// reader can look one up only if the line names the project it belongs
// to (OpenClaw's are cited); conch's own tracker does not ship.
var issueRef = regexp.MustCompile(`(?:^|[\s(,;])#\d+\b`)

// mdName matches a mention of a markdown file by name.
var mdName = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)

// inlineCode matches a code span.
var inlineCode = regexp.MustCompile("`[^`\n]*`")

// testName matches a Go test or fuzz target named in a code span.
var testName = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)`")

// TestDocsStandAlone checks that the user docs stand alone: no section
// signs, no "specification" or "the spec", no work sessions or issue
// numbers (an issue number only with its project named), every
// markdown file they name exists in the repository (so a design document
// that does not ship cannot be cited, in prose or in code), and every Go
// test they cite as checking a promise exists.
func TestDocsStandAlone(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	tests := goTestNames(t, root)
	for _, f := range userDocs(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := blankFences(blankGenerated(string(b)))
		prose := inlineCode.ReplaceAllString(text, "``")
		for i, line := range strings.Split(prose, "\n") {
			if m := notStandAlone.FindString(line); m != "" {
				t.Errorf("%s:%d: %q refers to a document or history the reader does not have: state the rule itself", f, i+1, m)
			}
			if m := issueRef.FindString(line); m != "" && !strings.Contains(line, "OpenClaw") {
				t.Errorf("%s:%d: %q cites an issue without naming its project (only OpenClaw's can be looked up)", f, i+1, strings.TrimSpace(m))
			}
			for _, name := range mdName.FindAllString(line, -1) {
				if !mdExists(root, f, name) {
					t.Errorf("%s:%d: names %s, which is not a file of the repository", f, i+1, name)
				}
			}
		}
		for _, name := range mdName.FindAllString(string(b), -1) {
			base := filepath.Base(name)
			for _, d := range designDocs {
				if base == d && !mdExists(root, f, name) {
					t.Errorf("%s: cites the design document %s, which does not ship", f, name)
				}
			}
		}
		for _, m := range testName.FindAllStringSubmatch(text, -1) {
			if !tests[m[1]] {
				t.Errorf("%s: cites %s, but no _test.go file defines it", f, m[1])
			}
		}
	}
}

// blankGenerated blanks the lines between "<!-- tree:" and "<!-- tree
// end -->": a list generated from the packages' doc comments, which
// TestCommentsStandAlone checks as Go comments (where "the spec" is a
// session's Spec), keeping the line numbers of the rest.
func blankGenerated(s string) string {
	lines := strings.Split(s, "\n")
	in := false
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "<!-- tree:"):
			in = true
		case strings.HasPrefix(line, "<!-- tree end -->"):
			in = false
		case in:
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// blankFences blanks the lines of fenced code blocks, keeping the line
// numbers of the rest.
func blankFences(s string) string {
	lines := strings.Split(s, "\n")
	in := false
	for i, line := range lines {
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		if in || fence {
			lines[i] = ""
		}
		if fence {
			in = !in
		}
	}
	return strings.Join(lines, "\n")
}

// mdExists reports whether a markdown file named in doc (relative to the
// repository root) exists: relative to the doc, to the root, or in docs/.
func mdExists(root, doc, name string) bool {
	for _, p := range []string{
		filepath.Join(root, filepath.Dir(doc), name),
		filepath.Join(root, name),
		filepath.Join(root, "docs", name),
	} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return true
		}
	}
	return false
}

var funcDecl = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)

// goTestNames collects the test, fuzz and benchmark functions of every
// _test.go file of the repository.
func goTestNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
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
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range funcDecl.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 100 {
		t.Fatalf("found only %d Go tests: wrong working directory?", len(names))
	}
	return names
}
