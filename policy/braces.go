package policy

import (
	"math"
	"math/bits"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The bounds on what one command's brace expansions may produce: bash
// expands braces before it runs anything, so `echo {a,b}{a,b}…` (17 pairs
// fit in a few hundred bytes) builds 131,072 words, and 27 pairs took a
// shell to 6.9 GB. Beyond either bound the analysis fails.
//
// MaxExpandedWords is the number of words all the brace expansions of a
// command (every word of every simple command, shell wrappers' scripts
// counted on their own) may produce; MaxExpandedBytes their total length,
// one separator per word included. The byte bound is Linux's ARG_MAX of
// 2 MiB: a program cannot be given a longer argument list anyway, so
// only a shell builtin could use more.
const (
	MaxExpandedWords = 100_000
	MaxExpandedBytes = 2 << 20
)

// expansion is the size of what a word (or part of one) expands to:
// words, and bytes (an upper bound for sequences and for parts that are
// not literal, whose source text stands in for their value). Both
// saturate at math.MaxUint64.
type expansion struct {
	words, bytes uint64
	// punct: a letter sequence runs through the characters between "Z"
	// and "a" ([ \ ] ^ _ `). bash reads the backslash and the backquote
	// it makes as quoting and command substitution after the expansion
	// (`echo {Z..a}id{Z..a}` fails with "bad substitution: no closing
	// "`"" and x{Z..a} loses its backslash), which a parse of the source
	// cannot follow: the analysis fails.
	punct bool
	// unbounded: the scan gave up (braceScanBudget).
	unbounded bool
}

func satAdd(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}

func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// braceExpansion reports what wd's brace expansions produce. It follows
// bash's own algorithm (brace_expand, brace_gobbler, expand_amble and
// expand_seqterm in bash's braces.c) over the word's source text, quotes
// and all, counting instead of building: syntax.SplitBraces reads some
// words differently from bash ({q,x}{..},{..}} is four words to bash and
// two to it), and a count lower than bash's would let a command through
// the bound. scanned counts the characters scanned for the command; past
// braceScanBudget the expansion is reported as unbounded (saturated),
// which fails closed: a word built to make the scan quadratic ({{{{…,)
// cannot make the gate slow.
func braceExpansion(src string, wd *syntax.Word, scanned *int) expansion {
	text := src[wd.Pos().Offset():wd.End().Offset()]
	c := braceCounter{scanned: scanned}
	e := c.expand(text)
	if c.over() {
		return expansion{words: math.MaxUint64, bytes: math.MaxUint64, unbounded: true}
	}
	e.bytes = satAdd(e.bytes, e.words) // a separator per word
	return e
}

// braceScanBudget bounds the characters braceExpansion may scan for one
// command: a command within MaxCommandBytes with ordinary braces scans
// each of its characters a few times.
const braceScanBudget = 1 << 22

type braceCounter struct{ scanned *int }

func (c *braceCounter) over() bool { return *c.scanned >= braceScanBudget }

// concat is the expansion of every word of a followed by every word of b.
func concat(a, b expansion) expansion {
	return expansion{words: satMul(a.words, b.words),
		bytes: satAdd(satMul(a.bytes, b.words), satMul(b.bytes, a.words)), punct: a.punct || b.punct}
}

func one(s string) expansion { return expansion{words: 1, bytes: uint64(len(s))} }

// expand is brace_expand: the preamble, the first brace expression that
// has a matching close brace, and the expansion of the rest.
func (c *braceCounter) expand(t string) expansion {
	i, ch, closer := 0, byte(0), 0
	for {
		i, ch = c.gobble(t, i, '{')
		if ch == 0 {
			break
		}
		// It begins a brace expression only if a "}" closes it.
		j, ch2 := c.gobble(t, i+1, '}')
		if ch2 == 0 {
			i++
			continue
		}
		closer = j
		break
	}
	if ch != '{' || c.over() {
		return one(t)
	}
	start := i + 1
	amble := t[start:closer]
	var tack expansion
	if !unescapedComma(amble) {
		seq, ok := seqterm(amble)
		switch {
		case ok:
			tack = seq
		case closer+1 < len(t):
			tack = one(t[start-1 : closer+1])
		default:
			return one(t)
		}
	} else {
		tack = c.amble(amble)
	}
	out := concat(one(t[:i]), tack)
	if post := t[closer+1:]; post != "" {
		out = concat(out, c.expand(post))
	}
	return out
}

// amble is expand_amble: the elements between the commas at level 0.
func (c *braceCounter) amble(t string) expansion {
	var total expansion
	for start, i := 0, 0; ; {
		j, ch := c.gobble(t, i, ',')
		e := c.expand(t[start:j])
		total = expansion{words: satAdd(total.words, e.words), bytes: satAdd(total.bytes, e.bytes), punct: total.punct || e.punct}
		if ch == 0 || c.over() {
			return total
		}
		i = j + 1
		start = i
	}
}

// unescapedComma: the amble holds a "," no backslash escapes (bash does
// not look at quotes here).
func unescapedComma(t string) bool {
	for j := 0; j < len(t); j++ {
		switch t[j] {
		case '\\':
			j++
		case ',':
			return true
		}
	}
	return false
}

func braceSpace(t string, i int) bool {
	return i < 0 || i >= len(t) || t[i] == ' ' || t[i] == '\t' || t[i] == '\n'
}

// gobble is brace_gobbler: from i, the index of the first satisfy at
// brace level 0 outside quotes (for "}", only once a "," or a ".." not
// right before the "}" has been seen at level 0), and the character, 0
// when there is none. "${" opens a level that its "}" closes.
func (c *braceCounter) gobble(t string, i int, satisfy byte) (int, byte) {
	level, quoted, passNext := 0, byte(0), false
	commas := 1
	if satisfy == '}' {
		commas = 0
	}
	for ; i < len(t); i++ {
		*c.scanned++
		if c.over() {
			return len(t), 0
		}
		ch := t[i]
		next := byte(0)
		if i+1 < len(t) {
			next = t[i+1]
		}
		if passNext {
			passNext = false
			continue
		}
		if ch == '\\' && (quoted == 0 || quoted == '"' || quoted == '`') {
			passNext = true
			continue
		}
		if ch == '$' && next == '{' && quoted != '\'' {
			passNext = true
			if quoted == 0 {
				level++
			}
			continue
		}
		if quoted != 0 {
			if ch == quoted {
				quoted = 0
			}
			continue
		}
		if ch == '"' || ch == '\'' || ch == '`' {
			quoted = ch
			continue
		}
		if ch == satisfy && level == 0 && commas > 0 {
			// An open brace between blanks, or before a close brace
			// after a blank, is not one.
			if ch == '{' && braceSpace(t, i-1) && (braceSpace(t, i+1) || next == '}') {
				continue
			}
			return i, ch
		}
		switch {
		case ch == '{':
			level++
		case ch == '}' && level > 0:
			level--
		case satisfy == '}' && ch == ',' && level == 0:
			commas++
		case satisfy == '}' && ch == '.' && next == '.' && (i+2 >= len(t) || t[i+2] != satisfy) && level == 0:
			commas++
		}
	}
	return len(t), 0
}

// seqterm is expand_seqterm and mkseq: X..Y[..S] with X and Y both
// integers or both single ASCII letters, from X to Y in steps of |S| (0
// is 1). A sequence bash would refuse to build (more than INT_MAX-3
// members) stays literal there; here it saturates, which only refuses
// more. Every member is counted as long as the longer endpoint's text.
func seqterm(t string) (expansion, bool) {
	k := strings.Index(t, "..")
	if k < 0 {
		return expansion{}, false
	}
	lhs, rhs := t[:k], t[k+2:]
	if lhs == "" || rhs == "" {
		return expansion{}, false
	}
	const (
		bad = iota
		integer
		letter
	)
	lt, rt := bad, bad
	lv, lok := legalNumber(lhs)
	switch {
	case lok:
		lt = integer
	case len(lhs) == 1 && asciiAlpha(lhs[0]):
		lt = letter
	}
	var rv int64
	rest := ""
	switch {
	case isDigit(rhs[0]) || (rhs[0] == '+' || rhs[0] == '-') && len(rhs) > 1 && isDigit(rhs[1]):
		var ok bool
		rv, rest, ok = strtoimax(rhs)
		if ok && (rest == "" || rest[0] == '.') {
			rt = integer
		}
	case asciiAlpha(rhs[0]) && (len(rhs) == 1 || rhs[1] == '.'):
		rt, rest = letter, rhs[1:]
	}
	incr := int64(1)
	if rt != bad {
		if strings.HasPrefix(rest, "..") && len(rest) > 2 {
			v, r, ok := strtoimax(strings.TrimLeft(rest[2:], " \t\n"))
			if !ok {
				rt = bad
			}
			incr, rest = v, r
		}
		if rest != "" {
			rt = bad
		}
	}
	if lt != rt || lt == bad {
		return expansion{}, false
	}
	punct := false
	if lt == letter {
		lv, rv = int64(lhs[0]), int64(rhs[0])
		punct = min(lv, rv) < 'a' && max(lv, rv) > 'Z'
	}
	if incr == 0 {
		incr = 1
	}
	step := uint64(incr)
	if incr < 0 {
		step = -uint64(incr)
	}
	var span uint64
	if lv <= rv {
		span = uint64(rv) - uint64(lv)
	} else {
		span = uint64(lv) - uint64(rv)
	}
	n := satAdd(span/step, 1)
	width := uint64(max(len(lhs), len(rhs)))
	return expansion{words: n, bytes: satMul(n, width), punct: punct}, true
}

func isDigit(b byte) bool    { return b >= '0' && b <= '9' }
func asciiAlpha(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// legalNumber is bash's legal_number: an integer, blanks around it
// allowed, that fits in 64 bits.
func legalNumber(s string) (int64, bool) {
	s = strings.Trim(s, " \t\n")
	if s == "" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// strtoimax reads an optionally signed decimal integer at the start of s
// (blanks before it skipped) and returns it, the rest of s, and false on
// overflow or when there are no digits.
func strtoimax(s string) (int64, string, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j == i {
		return 0, s, false
	}
	v, err := strconv.ParseInt(s[:j], 10, 64)
	return v, s[j:], err == nil
}

// tooLarge is the failure of a command whose expansions pass a bound,
// or whose scan gave up (unbounded).
func tooLarge(unbounded bool, e Expansion) string {
	switch {
	case unbounded:
		return "brace expansion too complex to bound (more than " + strconv.Itoa(braceScanBudget) + " characters scanned)"
	case e.Words > MaxExpandedWords:
		return "brace expansion too large: " + count(e.Words) + " words (the limit is " + strconv.Itoa(MaxExpandedWords) + ")"
	}
	return "brace expansion too large: " + count(e.Bytes) + " bytes (the limit is " + strconv.Itoa(MaxExpandedBytes) + ")"
}

func count(n uint64) string {
	if n == math.MaxUint64 {
		return "more than 18446744073709551614"
	}
	return strconv.FormatUint(n, 10)
}
