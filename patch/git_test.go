package patch

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/testkit/patchgen"
)

// applyGit applies a unified diff with git apply in dir.
func applyGit(t *testing.T, dir, diff string) {
	t.Helper()
	cmd := exec.Command("git", "apply", "--whitespace=nowarn", "-")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(diff)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\ndiff:\n%s", err, out, diff)
	}
}

// TestAgainstGitApply applies the same edits as a Begin Patch (with this
// package) and as a unified diff (with git apply) to copies of the same
// files, and requires identical trees. The random cases are generated
// from one list of edits per file (internal/testkit/patchgen); the fixed ones
// cover add, delete, rename and a file without a trailing newline.
func TestAgainstGitApply(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 1))
	type tc struct {
		name        string
		files       map[string]string
		patch, diff string
		want        string // expected f.txt, for the random cases
	}
	var cases []tc
	for i := 0; i < 40; i++ {
		lines := patchgen.Lines(r, 20+r.IntN(300), 10+r.IntN(60))
		edits := patchgen.Edits(r, lines, 1+r.IntN(8))
		cases = append(cases, tc{
			name:  "random",
			files: map[string]string{"f.txt": patchgen.Join(lines)},
			patch: patchgen.BeginPatch("f.txt", lines, edits),
			diff:  patchgen.UnifiedDiff("f.txt", lines, edits),
			want:  patchgen.Join(patchgen.Apply(lines, edits)),
		})
	}
	cases = append(cases,
		tc{
			name:  "add and delete",
			files: map[string]string{"old.txt": "a\nb\n"},
			patch: "*** Begin Patch\n*** Add File: dir/new.txt\n+x\n+y\n*** Delete File: old.txt\n*** End Patch",
			diff: "diff --git a/dir/new.txt b/dir/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/dir/new.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n" +
				"diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n--- a/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
		},
		tc{
			name:  "rename with change",
			files: map[string]string{"a/x.go": "package a\n\nfunc X() {}\n"},
			patch: "*** Begin Patch\n*** Update File: a/x.go\n*** Move to: b/x.go\n@@\n-package a\n+package b\n \n func X() {}\n*** End Patch",
			diff:  "diff --git a/a/x.go b/b/x.go\nrename from a/x.go\nrename to b/x.go\n--- a/a/x.go\n+++ b/b/x.go\n@@ -1,3 +1,3 @@\n-package a\n+package b\n \n func X() {}\n",
		},
		tc{
			name:  "no trailing newline, last line changed",
			files: map[string]string{"n.txt": "one\ntwo\nthree"},
			patch: "*** Begin Patch\n*** Update File: n.txt\n@@\n one\n two\n-three\n+THREE\n*** End of File\n*** End Patch",
			diff:  "diff --git a/n.txt b/n.txt\n--- a/n.txt\n+++ b/n.txt\n@@ -1,3 +1,3 @@\n one\n two\n-three\n\\ No newline at end of file\n+THREE\n",
		},
		tc{
			name:  "pure insertion at end",
			files: map[string]string{"e.txt": "a\nb\nc\n"},
			patch: "*** Begin Patch\n*** Update File: e.txt\n@@\n+d\n+e\n*** End Patch",
			diff:  "diff --git a/e.txt b/e.txt\n--- a/e.txt\n+++ b/e.txt\n@@ -1,3 +1,5 @@\n a\n b\n c\n+d\n+e\n",
		},
	)
	for i, c := range cases {
		ours, theirs := t.TempDir(), t.TempDir()
		for _, dir := range []string{ours, theirs} {
			for p, s := range c.files {
				mustWrite(t, filepath.Join(dir, p), s)
			}
		}
		if _, err := Apply(context.Background(), c.patch, Options{Workspace: ours}); err != nil {
			t.Fatalf("case %d (%s): %v", i, c.name, err)
		}
		applyGit(t, theirs, c.diff)
		// Files only: git apply removes directories a delete or rename
		// leaves empty; conch, like OpenClaw, keeps them.
		got, want := filesOnly(readTree(t, ours)), filesOnly(readTree(t, theirs))
		if len(got) != len(want) {
			t.Errorf("case %d (%s): trees differ: %v vs %v", i, c.name, keys(got), keys(want))
		}
		for k, w := range want {
			if string(got[k]) != string(w) {
				t.Errorf("case %d (%s): %s differs\nours: %q\ngit:  %q", i, c.name, k, got[k], w)
			}
		}
		if c.want != "" {
			// And both equal the edits applied directly.
			if b, _ := os.ReadFile(filepath.Join(ours, "f.txt")); string(b) != c.want {
				t.Errorf("case %d: result differs from the edits applied directly", i)
			}
		}
	}
}

func filesOnly(m map[string][]byte) map[string][]byte {
	for k := range m {
		if strings.HasSuffix(k, "/") {
			delete(m, k)
		}
	}
	return m
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
