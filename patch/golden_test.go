package patch

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected results of testdata/cases")

// TestGolden runs every case of testdata/cases: in/ is copied to a fresh
// workspace, patch is applied, and the outcome is compared with result
// (the success text, or "error <code>: <message>") and, on success, the
// workspace with out/; a failed patch must leave the workspace equal to
// in/. "$WS" in a patch stands for the workspace path.
func TestGolden(t *testing.T) {
	dirs, err := os.ReadDir("testdata/cases")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		name := d.Name()
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join("testdata/cases", name)
			ws := t.TempDir()
			in := readTree(t, filepath.Join(dir, "in"))
			writeTree(t, ws, in)
			pb, err := os.ReadFile(filepath.Join(dir, "patch"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Apply(context.Background(), strings.ReplaceAll(string(pb), "$WS", ws), Options{Workspace: ws})
			var got string
			if err != nil {
				var pe *Error
				if !errors.As(err, &pe) {
					t.Fatalf("error %T %v is not a *patch.Error", err, err)
				}
				got = "error " + pe.Code + ": " + pe.Message
			} else {
				got = res.Text
			}
			got = strings.ReplaceAll(got, ws, "$WS") + "\n"
			after := readTree(t, ws)
			if *update {
				os.WriteFile(filepath.Join(dir, "result"), []byte(got), 0o644)
				os.RemoveAll(filepath.Join(dir, "out"))
				if err == nil {
					writeTree(t, filepath.Join(dir, "out"), after)
				}
				return
			}
			want, rerr := os.ReadFile(filepath.Join(dir, "result"))
			if rerr != nil {
				t.Fatal(rerr)
			}
			if got != string(want) {
				t.Errorf("result:\n got %q\nwant %q", got, want)
			}
			expect := in
			if err == nil {
				expect = readTree(t, filepath.Join(dir, "out"))
			}
			compareTrees(t, after, expect)
		})
	}
}

// emptyDirMarker stands for an empty directory in a golden tree, since git
// does not keep empty directories.
const emptyDirMarker = ".emptydir"

func readTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return filepath.SkipDir
			}
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Name() == emptyDirMarker:
			// Git keeps no empty directories: a golden tree marks them.
		case d.IsDir():
			if rel != "." {
				m[rel+"/"] = nil
			}
		case d.Type()&fs.ModeSymlink != 0:
			dest, _ := os.Readlink(p)
			m[rel] = []byte("symlink -> " + dest)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func writeTree(t *testing.T, root string, m map[string][]byte) {
	t.Helper()
	for rel, b := range m {
		p := filepath.Join(root, rel)
		if strings.HasSuffix(rel, "/") {
			os.MkdirAll(p, 0o755)
			empty := true
			for other := range m {
				if other != rel && strings.HasPrefix(other, rel) {
					empty = false
				}
			}
			if empty {
				os.WriteFile(filepath.Join(p, emptyDirMarker), nil, 0o644)
			}
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func compareTrees(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("missing %s", k)
		} else if !bytes.Equal(g, w) {
			t.Errorf("%s:\n got %q\nwant %q", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s", k)
		}
	}
}
