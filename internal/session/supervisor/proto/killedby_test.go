package proto

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestKilledByDocumented: every cause of a kill is a row of the end-state
// table's killed line in docs/sessions.md and of its own table there, and
// nothing else is valid.
func TestKilledByDocumented(t *testing.T) {
	b, err := os.ReadFile("../../../../docs/sessions.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	killedRow := regexp.MustCompile("(?m)^\\| `killed` \\|.*$").FindString(doc)
	if killedRow == "" {
		t.Fatal("docs/sessions.md: no `killed` row in the end-state table")
	}
	for _, k := range KilledByAll {
		if !k.Valid() {
			t.Errorf("%q is not Valid", k)
		}
		if !strings.Contains(killedRow, "`"+string(k)+"`") {
			t.Errorf("docs/sessions.md: the killed row does not list %q: %s", k, killedRow)
		}
		if !regexp.MustCompile("(?m)^\\| `" + string(k) + "` \\|").MatchString(doc) {
			t.Errorf("docs/sessions.md: no row of the killedBy table for %q", k)
		}
	}
	for _, k := range []KilledBy{"", "Agent", "user", "shutdown "} {
		if k.Valid() {
			t.Errorf("%q is Valid", k)
		}
	}
}
