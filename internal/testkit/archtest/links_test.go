package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// mdLink matches an inline markdown link or image target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// mdInlineLink matches a link inside a heading, whose text alone counts.
var mdInlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// mdHeading matches an ATX heading line.
var mdHeading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)

// TestMarkdownLinks checks that every relative link in README.md, docs/*.md
// and the other top-level READMEs resolves to a file of the repository, and
// that a #fragment names a heading of the target (GitHub's anchor rules).
func TestMarkdownLinks(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	files := []string{"README.md"}
	for _, pat := range []string{"docs/*.md", "*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			if strings.Contains(rel, "node_modules") {
				continue
			}
			files = append(files, rel)
		}
	}
	if len(files) < 5 {
		t.Fatalf("found only %v: wrong working directory?", files)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		a := map[string]bool{}
		seen := map[string]int{}
		for _, m := range mdHeading.FindAllStringSubmatch(stripFences(string(b)), -1) {
			s := slugify(m[1])
			if n := seen[s]; n > 0 {
				a[s+"-"+strconv.Itoa(n)] = true
			} else {
				a[s] = true
			}
			seen[s]++
		}
		anchors[path] = a
		return a
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripFences(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := filepath.Join(root, filepath.Dir(f), path)
			if path == "" {
				dest = filepath.Join(root, f)
			}
			st, err := os.Stat(dest)
			if err != nil {
				t.Errorf("%s: link %q: %v", f, target, err)
				continue
			}
			if frag == "" || st.IsDir() || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !anchorsOf(dest)[frag] {
				t.Errorf("%s: link %q: no heading with anchor #%s in %s", f, target, frag, path)
			}
		}
	}
}

// stripFences drops fenced code blocks, whose lines are neither headings nor
// links.
func stripFences(s string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// slugify turns a heading into its GitHub anchor: lower case, markup and
// punctuation other than '-' and '_' dropped, spaces to '-'.
func slugify(h string) string {
	h = mdInlineLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r > 127 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsIndexed checks that every docs/*.md page is listed in the
// documentation tables of README.md and docs/README.md, so that no page is
// only reachable by guessing its name.
func TestDocsIndexed(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]string{"README.md": "docs/", "docs/README.md": ""}
	for idx, prefix := range index {
		b, err := os.ReadFile(filepath.Join(root, idx))
		if err != nil {
			t.Fatal(err)
		}
		links := map[string]bool{}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			path, _, _ := strings.Cut(m[1], "#")
			links[path] = true
		}
		for _, p := range pages {
			name := filepath.Base(p)
			if name == "README.md" {
				continue
			}
			if !links[prefix+name] {
				t.Errorf("%s does not link %s%s", idx, prefix, name)
			}
		}
	}
}
