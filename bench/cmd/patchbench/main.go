// Command patchbench measures apply_patch on a large file against git
// apply on the equivalent unified diff, in the same run: a 10 MB file
// with 1,000 hunks by default (bench/patch.sh).
//
// Three timings per repetition, medians reported:
//   - lib: patch.Apply in this process (parse, match, stage, fsync,
//     rename);
//   - cli: `conch apply-patch --workdir W` reading the patch from stdin
//     with an in-process engine (process start and engine open included);
//   - git: `git apply` of the unified diff.
//
// Each side starts from a fresh copy of the file, and the results are
// compared byte for byte before anything is reported.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
	"github.com/conchsh/conch/internal/testkit/patchgen"
	"github.com/conchsh/conch/patch"
)

func main() {
	conch := flag.String("conch", "", "the conch binary (required)")
	lines := flag.Int("lines", 200_000, "lines of the file (about 51 bytes each)")
	hunks := flag.Int("hunks", 1000, "hunks in the patch")
	reps := flag.Int("reps", 5, "repetitions; medians are reported")
	flag.Parse()
	if *conch == "" {
		fmt.Fprintln(os.Stderr, "patchbench: -conch is required")
		os.Exit(2)
	}
	if err := run(*conch, *lines, *hunks, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "patchbench:", err)
		os.Exit(1)
	}
}

func run(conch string, nLines, nHunks, reps int) error {
	r := rand.New(rand.NewPCG(1, 2))
	lines := patchgen.Lines(r, nLines, 50)
	edits := patchgen.Edits(r, lines, nHunks)
	orig := []byte(patchgen.Join(lines))
	want := []byte(patchgen.Join(patchgen.Apply(lines, edits)))
	bp := patchgen.BeginPatch("big.txt", lines, edits)
	diff := patchgen.UnifiedDiff("big.txt", lines, edits)

	tmp, err := os.MkdirTemp("", "patchbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	home := filepath.Join(tmp, "home")
	os.MkdirAll(home, 0o700)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"tools":{"exec":{"applyPatch":{"enabled":true}}}}`), 0o600); err != nil {
		return err
	}
	ws := filepath.Join(tmp, "ws")
	os.MkdirAll(ws, 0o755)
	file := filepath.Join(ws, "big.txt")
	fresh := func() error { return os.WriteFile(file, orig, 0o644) }
	check := func(side string) error {
		got, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s: result differs from the expected file", side)
		}
		return nil
	}
	var lib, cli, git []time.Duration
	for i := 0; i < reps; i++ {
		if err := fresh(); err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := patch.Apply(context.Background(), bp, patch.Options{Workspace: ws}); err != nil {
			return fmt.Errorf("lib: %w", err)
		}
		lib = append(lib, time.Since(t0))
		if err := check("lib"); err != nil {
			return err
		}

		fresh()
		cmd := exec.Command(conch, "apply-patch", "--home", home, "--workdir", ws)
		cmd.Stdin = strings.NewReader(bp)
		t0 = time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("conch apply-patch: %v: %s", err, out)
		}
		cli = append(cli, time.Since(t0))
		if err := check("cli"); err != nil {
			return err
		}

		fresh()
		cmd = exec.Command("git", "apply", "-")
		cmd.Dir = ws
		cmd.Stdin = strings.NewReader(diff)
		t0 = time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git apply: %v: %s", err, out)
		}
		git = append(git, time.Since(t0))
		if err := check("git"); err != nil {
			return err
		}
	}
	ml, mc, mg := benchkit.Median(lib), benchkit.Median(cli), benchkit.Median(git)
	mb := float64(len(orig)) / 1e6
	fmt.Printf("apply_patch vs git apply: %.1f MB file, %d hunks, %d reps (medians)\n", mb, len(edits), reps)
	fmt.Printf("  patch.Apply (library)       %8.1f ms  %7.1f MB/s\n", benchkit.Ms(ml), mb/ml.Seconds())
	fmt.Printf("  conch apply-patch (binary)  %8.1f ms  %7.1f MB/s\n", benchkit.Ms(mc), mb/mc.Seconds())
	fmt.Printf("  git apply                   %8.1f ms  %7.1f MB/s\n", benchkit.Ms(mg), mb/mg.Seconds())
	fmt.Printf("  ratio library/git %.2f, binary/git %.2f (below 1: faster than git)\n", ml.Seconds()/mg.Seconds(), mc.Seconds()/mg.Seconds())
	return nil
}
