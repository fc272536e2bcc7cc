package slug

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	validID  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	twoWords = regexp.MustCompile(`^[a-z]{3,6}-[a-z]{3,6}$`)
	suffixed = regexp.MustCompile(`^[a-z]{3,6}-[a-z]{3,6}-([2-9]|1[0-2])$`)
	three    = regexp.MustCompile(`^[a-z]{3,6}-[a-z]{3,6}-[a-z]{3,6}$`)
	threeRnd = regexp.MustCompile(`^[a-z]{3,6}-[a-z]{3,6}-[a-z]{3,6}-[0-9a-z]{4}$`)
)

// seeded returns a deterministic random source for reproducible tests.
func seeded(seed uint64) func(int) int {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)).IntN
}

func free(string) bool { return false }

func TestWordLists(t *testing.T) {
	word := regexp.MustCompile(`^[a-z]{3,6}$`)
	for name, list := range map[string][]string{"adjectives": adjectives, "nouns": nouns} {
		if len(list) != 256 {
			t.Errorf("%s: %d words, want 256", name, len(list))
		}
		for _, w := range list {
			if !word.MatchString(w) {
				t.Errorf("%s: %q is not 3–6 lowercase letters", name, w)
			}
		}
		if !slices.IsSorted(list) {
			t.Errorf("%s: not sorted (keep the file sorted for review)", name)
		}
		if c := slices.Compact(slices.Clone(list)); len(c) != len(list) {
			t.Errorf("%s: duplicates", name)
		}
	}
	for _, a := range adjectives {
		if slices.Contains(nouns, a) {
			t.Errorf("%q is both an adjective and a noun", a)
		}
	}
}

func TestFormat(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := New(free)
		if !twoWords.MatchString(id) || !validID.MatchString(id) {
			t.Fatalf("New = %q, want <adjective>-<noun>", id)
		}
		adj, noun, _ := strings.Cut(id, "-")
		if !slices.Contains(adjectives, adj) || !slices.Contains(nouns, noun) {
			t.Fatalf("New = %q: words not from the lists", id)
		}
		seen[id] = true
	}
	// 10000 draws from 65536 ids give about 9300 distinct ones; far fewer means a bad source.
	if len(seen) < 8500 {
		t.Errorf("only %d distinct ids in 10000 draws", len(seen))
	}
}

// TestOrder checks the sequence of candidates: base, base-2 … base-12, three words, then
// three words plus a random suffix.
func TestOrder(t *testing.T) {
	for _, reject := range []int{0, 1, 5, 12, 13, 20} {
		var tried []string
		taken := func(id string) bool {
			tried = append(tried, id)
			return len(tried) <= reject
		}
		id := generate(seeded(uint64(reject)), taken)
		if len(tried) != reject+1 || tried[reject] != id {
			t.Fatalf("reject %d: tried %q, got %q", reject, tried, id)
		}
		base := tried[0]
		if !twoWords.MatchString(base) {
			t.Fatalf("first candidate %q", base)
		}
		for i, c := range tried {
			var ok bool
			switch {
			case i == 0:
				ok = c == base
			case i <= 11:
				ok = c == base+"-"+[]string{"2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}[i-1]
			case i == 12:
				ok = three.MatchString(c)
			default:
				ok = threeRnd.MatchString(c)
			}
			if !ok || !validID.MatchString(c) {
				t.Errorf("reject %d: candidate %d is %q", reject, i, c)
			}
		}
	}
}

func TestThreeWordsDistinctAdjectives(t *testing.T) {
	intn := seeded(7)
	for range 100000 {
		parts := strings.Split(threeWords(intn), "-")
		if parts[0] == parts[1] {
			t.Fatalf("repeated adjective: %q", parts)
		}
	}
}

// TestHeavyCollision: a taken that rejects most candidates, and every id it was ever given
// (the registry grows). All ids must be valid, distinct and accepted by taken.
func TestHeavyCollision(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	used := map[string]bool{}
	calls := 0
	taken := func(id string) bool {
		calls++
		return used[id] || r.Float64() < 0.97
	}
	forms := map[string]int{}
	for range 3000 {
		id := generate(seeded(uint64(len(used))), taken)
		if used[id] {
			t.Fatalf("id %q given twice", id)
		}
		used[id] = true
		switch {
		case twoWords.MatchString(id):
			forms["two"]++
		case suffixed.MatchString(id):
			forms["suffix"]++
		case three.MatchString(id):
			forms["three"]++
		case threeRnd.MatchString(id):
			forms["random"]++
		default:
			t.Fatalf("id %q has no known form", id)
		}
	}
	// With 97% rejections every form is reached.
	for _, f := range []string{"two", "suffix", "three", "random"} {
		if forms[f] == 0 {
			t.Errorf("form %s never used: %v", f, forms)
		}
	}
	t.Logf("forms %v, %d calls to taken", forms, calls)
}

// TestCrowdedRegistry fills most of the two-word space and checks New still finds ids.
func TestCrowdedRegistry(t *testing.T) {
	used := map[string]bool{}
	for _, a := range adjectives {
		for _, n := range nouns[:200] {
			used[a+"-"+n] = true
		}
	}
	taken := func(id string) bool { return used[id] }
	for range 5000 {
		id := New(taken)
		if used[id] || !validID.MatchString(id) {
			t.Fatalf("New = %q (taken or invalid)", id)
		}
		used[id] = true
	}
}

func TestEverythingTakenPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic when taken rejects everything")
		}
	}()
	generate(seeded(1), func(string) bool { return true })
}

// TestDistribution: every word is used, and no word far more or less often than the others.
func TestDistribution(t *testing.T) {
	const n = 256 * 200 // mean 200 per word, standard deviation about 14
	intn := seeded(42)
	adj := map[string]int{}
	noun := map[string]int{}
	for range n {
		a, b, _ := strings.Cut(generate(intn, free), "-")
		adj[a]++
		noun[b]++
	}
	for name, counts := range map[string]map[string]int{"adjective": adj, "noun": noun} {
		if len(counts) != 256 {
			t.Errorf("%s: %d distinct words used, want 256", name, len(counts))
		}
		for w, c := range counts {
			if c < 120 || c > 280 {
				t.Errorf("%s %q drawn %d times, expected about 200", name, w, c)
			}
		}
	}
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		New(free)
	}
}
