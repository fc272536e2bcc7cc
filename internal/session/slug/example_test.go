package slug_test

import (
	"fmt"
	"regexp"

	"github.com/conchsh/conch/internal/session/slug"
)

func ExampleNew() {
	existing := map[string]bool{"calm-gulf": true}
	id := slug.New(func(id string) bool {
		// In conch, taken would claim the session directory (os.Mkdir) and report
		// whether it already existed.
		if existing[id] {
			return true
		}
		existing[id] = true
		return false
	})
	fmt.Println(regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`).MatchString(id), len(existing))
	// Output: true 2
}
