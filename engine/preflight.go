package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/conchsh/conch/apitype"

	"mvdan.cc/sh/v3/syntax"
)

// preflightMaxBytes is the largest script preflight reads.
const preflightMaxBytes = 512 << 10

var (
	pythonName = regexp.MustCompile(`^python(\d+(\.\d+)?)?$`)
	shellVar   = regexp.MustCompile(`\$([A-Z_][A-Z0-9_]+)`)
)

// preflight catches shell variables pasted into Python and JavaScript
// files. It returns "" when the command passes or the check
// does not apply.
func preflight(command, cwd string) string {
	if len(command) > apitype.MaxCommandBytes {
		return "" // exec refuses it before; the parser's stack is bounded by the length
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil || len(f.Stmts) != 1 {
		return ""
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Background || len(st.Redirs) > 0 || len(call.Assigns) > 0 || len(call.Args) < 2 {
		return ""
	}
	words := make([]string, len(call.Args))
	for i, w := range call.Args {
		lit, ok := literal(w)
		if !ok {
			return ""
		}
		words[i] = lit
	}
	exe := filepath.Base(words[0])
	lang := ""
	switch {
	case pythonName.MatchString(exe):
		lang = "python"
	case exe == "node":
		lang = "node"
	default:
		return ""
	}
	var operand string
	for _, a := range words[1:] {
		if strings.HasPrefix(a, "-") {
			switch a {
			case "-c", "-m", "-e", "-p", "--eval", "--print":
				return ""
			}
			continue
		}
		operand = a
		break
	}
	if operand == "" {
		return ""
	}
	ext := strings.ToLower(filepath.Ext(operand))
	if lang == "python" && ext != ".py" || lang == "node" && ext != ".js" && ext != ".mjs" && ext != ".cjs" {
		return ""
	}
	path := operand
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	root, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return ""
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > preflightMaxBytes {
		return ""
	}
	b, err := os.ReadFile(real)
	if err != nil {
		return ""
	}
	text := string(b)
	base := filepath.Base(real)
	if lang == "node" {
		for _, line := range strings.Split(text, "\n") {
			t := strings.TrimSpace(line)
			if t == "" {
				continue
			}
			if first, _, _ := strings.Cut(t, " "); first == "NODE" || strings.HasPrefix(first, "NODE=") || strings.HasPrefix(first, "NODE_") {
				return fmt.Sprintf("exec preflight: JS file starts with shell syntax (%s). This looks like a shell command, not JavaScript.", t)
			}
			break
		}
	}
	loc := shellVar.FindStringSubmatchIndex(text)
	if loc == nil {
		return ""
	}
	name := text[loc[2]:loc[3]]
	line := strings.Count(text[:loc[0]], "\n") + 1
	hint := fmt.Sprintf(`In Python, use os.environ.get("%s") instead of raw $%s.`, name, name)
	if lang == "node" {
		hint = fmt.Sprintf(`In Node.js, use process.env["%s"] instead of raw $%s.`, name, name)
	}
	return fmt.Sprintf("exec preflight: detected likely shell variable injection ($%s) in %s script: %s:%d.\n%s\n(If this is inside a string literal on purpose, escape it or restructure the code.)", name, lang, base, line, hint)
}

// literal returns a word's value when it is made only of literal text and
// quotes.
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}
