package cli

import (
	"strings"
	"testing"
)

// sessionActions are the process actions each session command runs.
var sessionActions = map[string][]string{
	"poll": {"poll"}, "log": {"log"}, "wait": {"wait"}, "search": {"search"}, "screen": {"screen"},
	"send": {"write", "send-keys", "paste", "submit"}, "kill": {"kill"}, "clear": {"clear"}, "rm": {"remove"},
}

// deletes are the actions after which the session and its log are gone.
var deletes = map[string]bool{"clear": true, "remove": true}

// TestSessionCommandHelpSaysWhatItDoes: every session command's summary
// names the process actions it runs, and one that deletes the session
// says so ("clear" once claimed to forget unread output while it deleted
// the session and its log); one that does not, does not.
func TestSessionCommandHelpSaysWhatItDoes(t *testing.T) {
	for name, doc := range sessionDocs {
		acts, ok := sessionActions[name]
		if !ok {
			t.Errorf("session command %s: no actions listed in sessionActions", name)
			continue
		}
		summary := doc[1]
		del := false
		for _, a := range acts {
			if !strings.Contains(summary, a) {
				t.Errorf("%s: summary %q does not name process %s", name, summary, a)
			}
			del = del || deletes[a]
		}
		if says := strings.HasPrefix(summary, "Delete"); says != del {
			t.Errorf("%s: summary %q; deletes the session: %v", name, summary, del)
		}
	}
}
