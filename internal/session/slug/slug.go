// Package slug makes the readable session ids: an adjective and a noun
// ("calm-gulf"), lowercase ASCII matching [a-z0-9][a-z0-9-]*, unique among the ids that
// exist.
//
// On collision New tries, in order: the suffixes -2 … -12 ("calm-gulf-2"), three words
// ("calm-bold-gulf"), then three words plus four random base36 characters
// ("calm-bold-gulf-x7k2") until one is free. The words come from two embedded lists of 256
// short, plain English words each.
package slug

import (
	_ "embed"
	"math/rand/v2"
	"strconv"
	"strings"
)

var (
	//go:embed adjectives.txt
	adjectiveList string
	//go:embed nouns.txt
	nounList string

	adjectives = strings.Fields(adjectiveList)
	nouns      = strings.Fields(nounList)
)

const (
	// maxSuffix is the last numeric suffix tried on the two-word id.
	maxSuffix = 12
	// randomLen is the number of base36 characters of the last form.
	randomLen = 4
	base36    = "0123456789abcdefghijklmnopqrstuvwxyz"
	// maxRandomTries bounds the attempts at the last form. With 2^24 three-word ids times
	// 36^4 suffixes, reaching it means taken rejects everything.
	maxRandomTries = 1 << 16
)

// New returns a session id for which taken(id) is false, calling taken with each candidate
// in the order described in the package comment. Words and suffixes are drawn from
// math/rand/v2's global source, which is seeded from the operating system; ids are readable
// names, not secrets.
//
// New does not remember ids. For uniqueness under concurrent callers, let taken claim the
// id in the same step as checking it (for example os.Mkdir of the session directory,
// returning false only when the directory was created); otherwise two callers can be given
// the same id. New is safe for concurrent use if taken is.
//
// New panics if taken rejects 65536 candidates of the last form in a row, which happens
// only when taken rejects every id (a broken taken, such as one that reports every id as
// taken when its store is unreadable).
func New(taken func(string) bool) string {
	return generate(rand.IntN, taken)
}

// generate is New with the random source given: intn(n) returns a value in [0, n).
func generate(intn func(int) int, taken func(string) bool) string {
	id := pick(intn, adjectives) + "-" + pick(intn, nouns)
	if !taken(id) {
		return id
	}
	for i := 2; i <= maxSuffix; i++ {
		if s := id + "-" + strconv.Itoa(i); !taken(s) {
			return s
		}
	}
	if s := threeWords(intn); !taken(s) {
		return s
	}
	for range maxRandomTries {
		if s := threeWords(intn) + "-" + random(intn); !taken(s) {
			return s
		}
	}
	panic("slug: taken rejected every candidate id")
}

func pick(intn func(int) int, words []string) string {
	return words[intn(len(words))]
}

// threeWords returns <adj>-<adj>-<noun> with two different adjectives.
func threeWords(intn func(int) int) string {
	i := intn(len(adjectives))
	j := intn(len(adjectives) - 1)
	if j >= i {
		j++
	}
	return adjectives[i] + "-" + adjectives[j] + "-" + pick(intn, nouns)
}

// random returns randomLen base36 characters.
func random(intn func(int) int) string {
	var b [randomLen]byte
	for i := range b {
		b[i] = base36[intn(len(base36))]
	}
	return string(b[:])
}
