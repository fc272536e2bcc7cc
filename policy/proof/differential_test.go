package proof

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/conchsh/conch/policy"
)

// diffTokens are word pieces where a parser and a shell could disagree:
// quotes, escapes, comments, braces, tildes, globs, expansions, reserved
// words, unicode blanks.
var diffTokens = []string{
	"a", "-n", "--", "#", "a#b", "'#'", `"#"`, `\#`, "{a,b}", "{1..3}", "{", "}", "x{", "~", "~/x", "x=~/y", "~root",
	"$X", "${X}", `"$X"`, `'$X'`, `\$X`, "$X$X", `"a b"`, "'a b'", `a\ b`, `\\`, `'\'`, `"\\"`, `"\""`, "*", "?", "[a]",
	"[", "]", "!", "!x", "if", "then", "fi", "do", "done", "case", "in", "esac", "function", "=", "x=1", "%", "^",
	"\u00a0", "a\u00a0b", "\u2028", "é", `"a'b"`, `'a"b'`, "--x=y", "-", "''", `""`, ":", ",", "@", "+", "a:b",
}

// TestPinnedMatchesShell runs generated commands the gate allows (an
// allowlisted program that prints its argv, and the shell wrappers) both
// as written and as their pinned text under bash, with X set, and fails
// when the two print different argvs or the written one runs another
// program: the pinned text must mean what bash reads in the command.
func TestPinnedMatchesShell(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	prog := filepath.Join(bin, "argv")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nfor a in \"$@\"; do printf '[%s]' \"$a\"; done; echo\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "a"), nil, 0o644)
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("CONCH_DIFF_EXEC")); err == nil && v > 0 {
		n = v
	}
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	env := policy.Env{PATH: bin + ":/usr/bin:/bin", Cwd: dir, Home: dir}
	allow := []policy.AllowEntry{{Pattern: prog}}
	ran, mismatch := 0, 0
	for i := 0; i < n && mismatch < 10; i++ {
		var words []string
		for k := rng.IntN(4); k >= 0; k-- {
			w := diffTokens[rng.IntN(len(diffTokens))]
			if rng.IntN(3) == 0 {
				w += diffTokens[rng.IntN(len(diffTokens))]
			}
			words = append(words, w)
		}
		cmd := "argv " + strings.Join(words, " ")
		switch rng.IntN(4) {
		case 1:
			cmd += " | argv x"
		case 2:
			cmd = "bash -c " + shQuote(cmd)
		}
		d := policy.Evaluate(policy.Request{Command: cmd, Security: policy.SecurityAllowlist, Ask: policy.AskOff,
			Allowlist: allow, SafeBins: []string{}, Env: env})
		if d.Outcome != policy.OutcomeRun {
			continue
		}
		ran++
		run := func(text string) string {
			c := exec.Command(bash, "-c", text)
			c.Dir = dir
			c.Env = []string{"PATH=" + env.PATH, "HOME=" + dir, "X=x y *", "LC_ALL=C.UTF-8"}
			out, err := c.CombinedOutput()
			if err != nil {
				return string(out) + " (" + err.Error() + ")"
			}
			return string(out)
		}
		if written, pinned := run(cmd), run(d.Pinned); written != pinned {
			mismatch++
			t.Errorf("%q\n\twritten: %q\n\tpinned %s: %q", cmd, written, d.Pinned, pinned)
		}
	}
	t.Logf("%d allowed commands compared", ran)
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
