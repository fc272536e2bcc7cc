package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/term/render"
)

// TestReadLinesDroppedAndUnreadable: a journal with both a range the cap
// dropped and a damaged record after it renders one marker for each, with
// the right counts, and every other line.
func TestReadLinesDroppedAndUnreadable(t *testing.T) {
	dir := t.TempDir()
	w, err := journal.Create(dir, journal.Options{MaxBytes: 64 << 10, HeadBytes: 4 << 10, SegmentBytes: 4 << 10, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10000
	for i := range n {
		if _, err := w.Append(journal.Stdout, fmt.Appendf(nil, "line-%05d\n", i)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	info, _ := journal.Stat(dir)
	if info.DroppedBytes == 0 {
		t.Fatal("nothing dropped: the test needs a dropped range")
	}
	// Damage the payload of line 9990, in the last segment.
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	last := segs[len(segs)-1]
	b, _ := os.ReadFile(last)
	i := strings.Index(string(b), "line-09990")
	if i < 0 {
		t.Fatal("line-09990 not in the last segment")
	}
	b[i+7] ^= 1
	os.WriteFile(last, b, 0o600)

	var lines []string
	res, err := readLines(dir, readOpts{}, func(l render.Line) { lines = append(lines, l.Text) })
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(lines, "\n")
	dropped := regexp.MustCompile(`\[… (\d+) bytes \((\d+) lines\) dropped …\]`).FindStringSubmatch(text)
	lost := regexp.MustCompile(`\[… (\d+) bytes unreadable …\]`).FindStringSubmatch(text)
	if dropped == nil || dropped[1] != fmt.Sprint(info.DroppedBytes) {
		t.Fatalf("dropped marker %v, want %d bytes", dropped, info.DroppedBytes)
	}
	if lost == nil || lost[1] != "11" || res.unreadable != 11 {
		t.Fatalf("unreadable marker %v (%d), want 11 bytes (one line)", lost, res.unreadable)
	}
	if strings.Contains(text, "line-09990") || !strings.Contains(text, "line-09989\n"+lost[0]+"\nline-09991") {
		t.Fatalf("around the damage: %q", text[strings.Index(text, "line-0998"):])
	}
	if res.end != int64(n*11) {
		t.Fatalf("end %d, want %d", res.end, n*11)
	}
}
