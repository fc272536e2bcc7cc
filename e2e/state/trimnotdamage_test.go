package state

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestQuotaTrimIsNotDamage: a journal trimmed by quotas.journalBytes
// while its session runs lost its middle on purpose. Reading it (log
// from the start, poll, log of the tail) must not be reported as damage
// (no "damaged state file" record, no "unreadable" bytes); the log says
// it was a trim, and the reads show the cut as dropped output.
func TestQuotaTrimIsNotDamage(t *testing.T) {
	home := e2etest.NewHome(t, `{"quotas":{"journalBytes":8388608}}`)
	c := e2etest.StartConch(t, home)
	r := c.Exec(map[string]any{"command": "yes 0123456789abcdef | head -c 40000000; echo; echo END-OF-FLOOD; sleep 925.1", "background": true})
	id := r.Str("sessionId")
	e2etest.Eventually(t, 60*time.Second, func() string {
		if !strings.Contains(c.Process(map[string]any{"action": "log", "sessionId": id, "limit": 5}).Text, "END-OF-FLOOD") {
			return "flood not done"
		}
		return ""
	})
	// The trim is done (the journal's segments shrink to the quota)
	// once the supervisor answered the engine's trim request.
	jdir := filepath.Join(home, "sessions", id)
	e2etest.Eventually(t, 20*time.Second, func() string {
		var size int64
		ents, _ := os.ReadDir(jdir)
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".seg") {
				size += fi.Size()
			}
		}
		if size > 8<<20+8<<20/50 {
			return fmt.Sprintf("journal is %d bytes, quota 8 MiB", size)
		}
		return ""
	})
	// Every way of reading across the cut.
	reads := []map[string]any{
		{"action": "log", "sessionId": id, "offset": 0, "limit": 200000},
		{"action": "log", "sessionId": id},
		{"action": "poll", "sessionId": id, "since": 0},
		{"action": "search", "sessionId": id, "pattern": "END-OF-FLOOD"},
	}
	for _, a := range reads {
		r := c.Process(a)
		if strings.Contains(r.Text, "unreadable") || r.Num("unreadableBytes") > 0 {
			t.Errorf("%v after a trim says bytes are unreadable: %.300q %v", a, r.Text, r.D["unreadableBytes"])
		}
	}
	if d := c.Stderr.DamageRecords(); len(d) != 0 {
		t.Errorf("a trim by quota was logged as damage: %v\n%s", d, strings.Join(c.Stderr.Records("damaged state file"), "\n"))
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		if len(c.Stderr.Records("journal trimmed by quota")) == 0 {
			return "the log does not say the journal was trimmed by quota: " + c.Stderr.String()
		}
		return ""
	})
	c.Process(map[string]any{"action": "kill", "sessionId": id})
}
