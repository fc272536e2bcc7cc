package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docCodeLines returns, per user doc (README.md, docs/*.md, the other
// top-level READMEs), its code: each inline code span and each line of a
// fenced block, with whether it came from a fence.
func docCodeLines(t *testing.T) map[string][]docCode {
	t.Helper()
	root := filepath.Join("..", "..")
	files := []string{filepath.Join(root, "README.md")}
	for _, pat := range []string{"docs/*.md", "*/README.md"} {
		m, _ := filepath.Glob(filepath.Join(root, pat))
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v: wrong working directory?", files)
	}
	span := regexp.MustCompile("`([^`\n]+)`")
	out := map[string][]docCode{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		in := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				in = !in
				continue
			}
			if in {
				out[rel] = append(out[rel], docCode{line, true})
				continue
			}
			for _, m := range span.FindAllStringSubmatch(line, -1) {
				out[rel] = append(out[rel], docCode{m[1], false})
			}
		}
	}
	return out
}

type docCode struct {
	text  string
	fence bool
}

// conchCall matches "conch ARGS" at the start of code or after a blank,
// "$", ";", "|", "&" or "(", up to the end of that shell command.
var conchCall = regexp.MustCompile(`(?:^|[\s$;|&(])conch((?:\s+[^\s;|&)#<>]+)*)`)

// TestDocsNameRealCommands: every conch command line quoted in the user
// docs names commands and flags the binary has. A command line in a
// fenced block must start with a command; in inline code, "conch" may be
// followed by prose (a message such as "conch engine unreachable"), so an
// unknown first word is skipped there, but the subcommands and flags of a
// known command are checked everywhere (a line followed by its "unknown
// flag" error is an example of a mistake and skipped). A flag must be written as the
// help shows it (--home, -C), not in an older spelling.
func TestDocsNameRealCommands(t *testing.T) {
	root := NewRoot()
	internal := map[string]bool{"supervise": true, "sandbox-init": true}
	checked := 0
	for doc, codes := range docCodeLines(t) {
		for k, c := range codes {
			if c.fence && k+1 < len(codes) && strings.Contains(codes[k+1].text, "unknown flag") {
				continue // an example of a wrong command line and its error
			}
			for _, m := range conchCall.FindAllStringSubmatch(c.text, -1) {
				words := strings.Fields(m[1])
				if len(words) == 0 || internal[words[0]] || strings.HasPrefix(words[0], "<") {
					continue
				}
				if !strings.HasPrefix(words[0], "-") && !isSub(root, words[0]) {
					if c.fence && regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(words[0]) {
						t.Errorf("%s: %q: conch has no command %q", doc, c.text, words[0])
					}
					continue
				}
				checked++
				cmd := root
				i := 0
				for ; i < len(words); i++ {
					w := words[i]
					if strings.HasPrefix(w, "-") || !isSub(cmd, w) {
						break
					}
					cmd = sub(cmd, w)
				}
				cmd.InitDefaultHelpFlag()
				cmd.InitDefaultVersionFlag()
				if i < len(words) && cmd.HasAvailableSubCommands() && cmd.Runnable() == false && regexp.MustCompile(`^[a-z][a-z-]+$`).MatchString(words[i]) {
					t.Errorf("%s: %q: %q has no subcommand %q", doc, c.text, cmd.CommandPath(), words[i])
				}
				for _, w := range words[i:] {
					if w == "--" {
						break
					}
					if msg := flagProblem(cmd, w); msg != "" {
						t.Errorf("%s: %q: %s", doc, c.text, msg)
					}
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d conch command lines: wrong working directory?", checked)
	}
}

func isSub(c *cobra.Command, name string) bool { return sub(c, name) != nil }

func sub(c *cobra.Command, name string) *cobra.Command {
	for _, s := range c.Commands() {
		if s.Name() == name || s.HasAlias(name) {
			return s
		}
	}
	return nil
}

// flagProblem says what is wrong with word as a flag of cmd ("" if it is
// not a flag or is one of cmd's, as written in its help).
func flagProblem(cmd *cobra.Command, word string) string {
	lookup := func(name string) *pflag.Flag {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f
		}
		return cmd.InheritedFlags().Lookup(name)
	}
	switch {
	case strings.HasPrefix(word, "--") && len(word) > 2:
		name, _, _ := strings.Cut(word[2:], "=")
		name = strings.TrimRight(name, ".,:…]")
		if !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(name) {
			return ""
		}
		if lookup(name) == nil {
			return cmd.CommandPath() + " has no flag --" + name
		}
	case strings.HasPrefix(word, "-") && len(word) > 1 && word[1] != '-':
		name := strings.TrimRight(word[1:], ".,:…]")
		if !regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`).MatchString(name) {
			return ""
		}
		if len(name) > 1 {
			if lookup(name) != nil {
				return cmd.CommandPath() + ": write --" + name + ", not -" + name
			}
			return ""
		}
		if cmd.Flags().ShorthandLookup(name) == nil && cmd.InheritedFlags().ShorthandLookup(name) == nil {
			return cmd.CommandPath() + " has no flag -" + name
		}
	}
	return ""
}
