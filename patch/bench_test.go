package patch

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/conchsh/conch/internal/testkit/patchgen"
)

// BenchmarkApplyLarge applies 1,000 hunks to a 10 MB file, end to end:
// read, match, stage, fsync, rename. The file is restored between
// iterations outside the timer. Compare with git apply on the same edits
// with bench/patch.sh.
func BenchmarkApplyLarge(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	lines := patchgen.Lines(r, 200_000, 50)
	edits := patchgen.Edits(r, lines, 1000)
	if len(edits) != 1000 {
		b.Fatalf("%d edits", len(edits))
	}
	orig := []byte(patchgen.Join(lines))
	p := patchgen.BeginPatch("big.txt", lines, edits)
	ws := b.TempDir()
	path := filepath.Join(ws, "big.txt")
	b.SetBytes(int64(len(orig)))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := Apply(context.Background(), p, Options{Workspace: ws}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse parses the 1,000-hunk patch alone.
func BenchmarkParse(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	lines := patchgen.Lines(r, 200_000, 50)
	p := patchgen.BeginPatch("big.txt", lines, patchgen.Edits(r, lines, 1000))
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := Parse(p); err != nil {
			b.Fatal(err)
		}
	}
}
