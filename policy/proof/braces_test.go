package proof

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/conchsh/conch/policy"
)

// braceGen generates words in the language of bash's brace expansion:
// lists (nested), sequences of numbers (negative, zero-padded, with
// steps of either sign and 0) and of letters, concatenations (products),
// quotes, escapes and parameters, and the forms bash leaves literal ({}, {a}, {1..a}, {1..2..3..4}, an
// unclosed "{", a ".." inside a list, a "," inside a sequence).
type braceGen struct{ r *rand.Rand }

func (g braceGen) lit() string {
	const alpha = "abcxyz019-_."
	if g.r.IntN(4) == 0 {
		// Quoting and parameters, which bash's scan of the word skips
		// or counts levels for.
		return []string{`"a b"`, `'{,}'`, `"{"`, `\{`, `\,`, `\}`, `${x}`, `"${x}"`, `"x,"`, `'..'`}[g.r.IntN(10)]
	}
	n := g.r.IntN(3)
	var b strings.Builder
	for range n {
		b.WriteByte(alpha[g.r.IntN(len(alpha))])
	}
	return b.String()
}

func (g braceGen) num() string {
	n := g.r.IntN(25) - 8
	switch g.r.IntN(5) {
	case 0:
		return fmt.Sprintf("%03d", max(n, 0)) // zero-padded
	case 1:
		return strconv.Itoa(n * 7)
	}
	return strconv.Itoa(n)
}

func (g braceGen) seq() string {
	var s string
	if g.r.IntN(3) == 0 {
		letters := "aAzZbm"
		s = fmt.Sprintf("{%c..%c", letters[g.r.IntN(len(letters))], letters[g.r.IntN(len(letters))])
	} else {
		s = "{" + g.num() + ".." + g.num()
	}
	if g.r.IntN(2) == 0 {
		s += ".." + strconv.Itoa(g.r.IntN(9)-4)
	}
	return s + "}"
}

func (g braceGen) word(depth int) string {
	var b strings.Builder
	for range 1 + g.r.IntN(3) {
		switch k := g.r.IntN(10); {
		case k < 3:
			b.WriteString(g.lit())
		case k < 5:
			b.WriteString(g.seq())
		case k < 8 && depth < 3:
			b.WriteString("{")
			for i := range 1 + g.r.IntN(3) {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(g.word(depth + 1))
			}
			b.WriteString("}")
		default:
			b.WriteString([]string{"{}", "{a}", "{1..a}", "{1..2..3..4}", "{a,b", "{1,2..3}", "{1..2,3}", "x}", "{..}", "{a..}"}[g.r.IntN(10)])
		}
	}
	if b.Len() == 0 {
		return "q"
	}
	return b.String()
}

// TestBraceExpansionMatchesBash: for generated words the number of words
// the analysis says a command expands to (policy.Analysis.Expanded, which
// it bounds) is what bash's own expansion produces (`set -- WORD; echo
// $#`), and the length it computes is at least bash's. A letter sequence
// through the punctuation between Z and a is refused instead.
func TestBraceExpansionMatchesBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	seed := rand.Uint64()
	g := braceGen{rand.New(rand.NewPCG(seed, 22))}
	var words []string
	var script strings.Builder
	script.WriteString("x=v\n")
	for len(words) < 600 {
		w := g.word(0)
		a := policy.Analyze("echo " + w)
		if !a.OK {
			// bash re-reads the backslash and backquote a letter
			// sequence through [ \ ] ^ _ ` makes: refused.
			if !strings.Contains(a.Reason, "brace sequence through") && !strings.HasPrefix(a.Reason, "brace expansion too large") {
				t.Errorf("%s: refused: %s", w, a.Reason)
			}
			continue
		}
		if a.Expanded.Words > 20000 {
			continue // keep bash quick
		}
		words = append(words, w)
		fmt.Fprintf(&script, "set -- %s; s=\"$*\"; echo \"$# ${#s}\"\n", w)
	}
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("bash: %v: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(words) {
		t.Fatalf("bash printed %d lines for %d words (seed %d)", len(lines), len(words), seed)
	}
	for i, w := range words {
		var n, length uint64
		fmt.Sscan(lines[i], &n, &length)
		e := policy.Analyze("echo " + w).Expanded
		if e.Words-1 != n { // echo is a word too
			t.Errorf("%s: computed %d words, bash made %d (seed %d)", w, e.Words-1, n, seed)
		}
		if e.Bytes < length {
			t.Errorf("%s: computed %d bytes, bash made %d (seed %d)", w, e.Bytes, length, seed)
		}
	}
}
