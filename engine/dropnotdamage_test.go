package engine

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/term/render"
)

// TestDeliberateDropsAreNotDamage: what the journal drops on purpose
// while a read is under way (the cap dropping the oldest tail segments as
// the command writes on, a quota trim) is dropped output, never damage:
// a read that found the dropped range smaller at its first gap must not
// count the rest as unreadable (it logged "damaged state file" for a
// journal trimmed by quotas.journalBytes); nor may a journal whose
// session was removed meanwhile. Each deliberate drop is made
// at every point of a read.
func TestDeliberateDropsAreNotDamage(t *testing.T) {
	line := bytes.Repeat([]byte("0123456789abcde\n"), 64) // 1 KiB
	var dir string
	drops := map[string]func(w *journal.Writer){
		// The session removed (process remove, clear, the TTL sweep)
		// while a read is under way.
		"removed": func(w *journal.Writer) { os.RemoveAll(dir) },
		"cap": func(w *journal.Writer) {
			for i := 0; i < 48; i++ {
				w.Append(journal.Stdout, line)
			}
		},
		"trim": func(w *journal.Writer) { w.Trim(16 << 10) },
		"trim then cap": func(w *journal.Writer) {
			w.Trim(16 << 10)
			for i := 0; i < 24; i++ {
				w.Append(journal.Stdout, line)
			}
		},
	}
	for name, drop := range drops {
		for at := 1; at < 40; at += 3 {
			t.Run(fmt.Sprintf("%s/after line %d", name, at), func(t *testing.T) {
				dir = t.TempDir()
				w, err := journal.Create(dir, journal.Options{MaxBytes: 64 << 10, HeadBytes: 4 << 10, SegmentBytes: 4 << 10, SyncInterval: -1, New: true})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				for i := 0; i < 160; i++ { // past the cap: a dropped range exists
					w.Append(journal.Stdout, line)
				}
				n, done := 0, false
				var markers []string
				res, err := readLines(dir, readOpts{raw: true, outputEnd: w.Cursor()}, func(l render.Line) {
					if strings.HasPrefix(l.Text, "[…") {
						markers = append(markers, l.Text)
					}
					if n++; n == at*64 && !done {
						done = true
						drop(w)
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if res.unreadable != 0 {
					t.Errorf("%d bytes counted unreadable after a deliberate drop; markers %q", res.unreadable, markers)
				}
			})
		}
	}
}
