package policy

import (
	"strings"
	"testing"
	"time"
)

// TestBraceExpansionBound: a command whose brace expansions exceed a
// bound fails the analysis with the reason, however the product is made
// (pairs, ranges, nesting, several words); one just under passes.
func TestBraceExpansionBound(t *testing.T) {
	for _, c := range []struct {
		cmd string
		ok  bool
	}{
		{"echo " + strings.Repeat("{a,b}", 27), false},      // the report's
		{"echo " + strings.Repeat("{a,b}", 16), true},       // 65,536 words
		{"echo " + strings.Repeat("{a,b}", 17), false},      // 131,072
		{"echo " + strings.Repeat("{", 60000) + ",", false}, // quadratic for bash's scan: given up
		{"echo " + strings.Repeat("{a,", 30000), false},     // unclosed, literal to bash after a quadratic scan: given up
		{"echo {Z..a}", false},                              // punctuation, re-read by bash
		{"echo {a..Z..7}", false},
		{"echo {A..Z}{a..z}", true},
		{"echo {1..99999}", true},                  // with echo 100,000 words
		{"echo {1..100001}", false},                //
		{"echo {20000..1000000000..10000}", true},  // 99,999 words
		{"echo {10000..1000000000..10000}", false}, // 100,001 with echo
		{"echo {1..9223372036854775807}", false},   // saturates
		{"echo {a..z}{a..z}{a..z}{a..z}", false},   // 456,976
		{"echo {{a,b},{c,{d,e}}}{1..10}", true},    // nested: 50
		{"echo {1..300}{1..300} x", true},          // 90,001
		{"echo {1..300}{1..300} {1..300}{1..300}", false},
		{"echo " + strings.Repeat("x", 60000) + "{1..40}", false}, // 40 × 60 KB bytes
		{"echo {1..1000}" + strings.Repeat("x", 1000), true},      // 1 MB
		{"echo '{a,b}" + strings.Repeat("{a,b}", 30) + "'", true}, // quoted: literal
		{`echo \{a,b\}` + strings.Repeat(`\{a,b\}`, 30), true},    // escaped: literal
	} {
		start := time.Now()
		a := Analyze(c.cmd)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%.60s: the analysis took %v", c.cmd, d)
		}
		short := c.cmd
		if len(short) > 60 {
			short = short[:60] + "…"
		}
		if a.OK != c.ok {
			t.Errorf("%s: OK %v (%s), want %v", short, a.OK, a.Reason, c.ok)
		}
		if !c.ok && !strings.HasPrefix(a.Reason, "brace expansion too ") && !strings.HasPrefix(a.Reason, "unsupported shell construct: brace sequence through") {
			t.Errorf("%s: reason %q", short, a.Reason)
		}
	}
}
