package engine

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/conchsh/conch/internal/term/keys"
)

// oldScreenDrawing is the pattern screen views were once decided by; the
// scanner must agree with it on every well-formed sequence it named.
var oldScreenDrawing = regexp.MustCompile(`\x1b\[\?(?:1049|1047|47)h|\x1b\[\d+;\d+[Hf]|\x1b\[[Hf]|\x1b\[\d+d`)

// score feeds out to a scanner in chunks of size n (all at once when 0)
// and returns the screenDrawing score.
func score(out string, n int) int {
	total := 0
	sc := keys.Scanner{Handle: func(q keys.Seq) { total += screenDrawing(q) }}
	if n == 0 {
		n = len(out) + 1
	}
	for i := 0; i < len(out); i += n {
		sc.Write([]byte(out[i:min(i+n, len(out))]))
	}
	return total
}

// TestScreenDrawing generates the sequences a full-screen program writes,
// their near misses and other sequences, each alone and amid text, and
// checks the score against the former pattern, fed whole and split at
// every byte.
func TestScreenDrawing(t *testing.T) {
	var seqs []string
	for _, m := range []string{"1049", "1047", "47", "1", "2004", "1048", "25"} {
		for _, f := range []string{"h", "l"} {
			seqs = append(seqs, "\x1b[?"+m+f)
		}
	}
	for _, p := range []string{"1;1", "12;40", "5", "", ";5", "5;", "1;2;3", "?1;1", ">1;1"} {
		for _, f := range []string{"H", "f", "d", "m", "J", "K"} {
			seqs = append(seqs, "\x1b["+p+f)
		}
	}
	seqs = append(seqs, "\x1b]0;title\x07", "\x1b]0;\x1b[1;1H\x07", "\x1bc", "\x1b(B", "\x1b[38:2:1:2:3m", "plain text\r\n")
	for _, q := range seqs {
		for _, out := range []string{q, "ab" + q + "cd", q + q, "x\r\n" + q + "\x1b[0m" + q} {
			want := 0
			for _, m := range oldScreenDrawing.FindAllString(out, -1) {
				if m[len(m)-1] == 'h' {
					want += screenThreshold
				} else {
					want++
				}
			}
			for n := 0; n <= 3; n++ {
				if got := score(out, n); got != want {
					t.Errorf("score(%q) in chunks of %d = %d, want %d", out, n, got, want)
				}
			}
		}
	}
}

// TestScreenDrawingBeyondThePattern: what the pattern missed and a
// terminal does: modes set together, a C0 control inside the sequence, and
// a sequence split far from where a 16-byte carry reached.
func TestScreenDrawingBeyondThePattern(t *testing.T) {
	for out, want := range map[string]int{
		"\x1b[?1;1049h":                         screenThreshold,
		"\x1b[?1049;2004h":                      screenThreshold,
		"\x1b[12;\r40H":                         1,
		"\x1b[" + fmt.Sprintf("%030d", 5) + "d": 1,
		"\x1b[?1049:1h":                         0,
	} {
		for n := 0; n <= 3; n++ {
			if got := score(out, n); got != want {
				t.Errorf("score(%q) in chunks of %d = %d, want %d", out, n, got, want)
			}
		}
	}
}
