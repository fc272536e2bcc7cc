package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// guardState is everything below ws, for comparing a tree before and
// after (.git/objects left out: a Guard does not record it).
func guardState(t *testing.T, ws string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(ws, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := Within(ws, p)
		if strings.HasPrefix(rel, ".git/objects") {
			return nil
		}
		fmt.Fprintf(&b, "%s %v", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", l)
		case fi.Mode().IsRegular():
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", c)
		}
		b.WriteString("\n")
		return nil
	})
	return b.String()
}

// TestGuardRestores generates the changes a run could make to what the
// sandbox protects — every mutation (new content, new mode, removed,
// replaced by a directory or a link, a new entry) of every kind of
// protected path (a file, a directory and a file in it, a git
// directory's config, hooks and a missing commondir) — and checks that
// Check reports each, puts the tree back exactly as it was, and keeps
// what the run wrote in the quarantine directory. A path the Guard does
// not record (the git directory's objects) is left alone.
func TestGuardRestores(t *testing.T) {
	targets := []struct{ rel, kind string }{
		{"shared.gitconfig", "file"},
		{".githooks", "dir"},
		{".githooks/pre-commit", "file"},
		{".git/config", "file"},
		{".git/hooks", "dir"},
		{".git/hooks/pre-commit", "file"},
		{".git/commondir", "missing"},
		{".git/commondir", "missing-link"},
	}
	mutations := []string{"content", "mode", "remove", "to-dir", "to-link", "add-inside"}
	for _, tg := range targets {
		for _, m := range mutations {
			if strings.HasPrefix(tg.kind, "missing") && m != "add-inside" || tg.kind == "file" && m == "add-inside" {
				continue
			}
			name := tg.rel + "/" + tg.kind + "/" + m
			ws := t.TempDir()
			os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
			os.MkdirAll(filepath.Join(ws, ".git", "objects"), 0o755)
			os.MkdirAll(filepath.Join(ws, ".git", "refs"), 0o755)
			os.MkdirAll(filepath.Join(ws, ".githooks"), 0o755)
			os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
			os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n\tbare = false\n"), 0o644)
			os.WriteFile(filepath.Join(ws, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
			os.WriteFile(filepath.Join(ws, ".githooks", "pre-commit"), []byte("#!/bin/sh\necho user\n"), 0o755)
			os.WriteFile(filepath.Join(ws, "shared.gitconfig"), []byte("[core]\n\thooksPath = .githooks\n"), 0o644)
			before := guardState(t, ws)
			// As gitAccess "ro" mounts them (the git directory whole) and
			// as "rw" does (its members one by one).
			roots := []string{".git", ".githooks", "shared.gitconfig"}
			if strings.Contains(name, "/mode") || strings.Contains(name, "missing") {
				roots = []string{".git/config", ".git/hooks", ".githooks", "shared.gitconfig"}
			}
			g := NewGuard(ws, roots)
			p := filepath.Join(ws, tg.rel)
			switch m {
			case "content":
				os.WriteFile(p, []byte("#!/bin/sh\ntouch /tmp/pwned\n"), 0o755)
				if tg.kind == "dir" {
					os.Chmod(p, 0o777)
				}
			case "mode":
				os.Chmod(p, 0o777)
			case "remove":
				os.RemoveAll(p)
			case "to-dir":
				os.RemoveAll(p)
				os.MkdirAll(filepath.Join(p, "x"), 0o755)
			case "to-link":
				os.RemoveAll(p)
				os.Symlink("/tmp", p)
			case "add-inside":
				switch tg.kind {
				case "missing":
					os.WriteFile(p, []byte("/tmp/evil\n"), 0o644)
				case "missing-link":
					os.Symlink("../..", p)
				default:
					os.WriteFile(filepath.Join(p, "post-checkout"), []byte("#!/bin/sh\ntouch /tmp/pwned\n"), 0o755)
				}
			}
			os.WriteFile(filepath.Join(ws, ".git", "objects", "new"), []byte("x"), 0o644)
			q := filepath.Join(t.TempDir(), "q")
			cs := g.Check(q)
			if len(cs) == 0 {
				t.Errorf("%s: no change reported", name)
				continue
			}
			for _, c := range cs {
				if strings.HasPrefix(c.Action, "could not") {
					t.Errorf("%s: %s %s: %s", name, c.Path, c.What, c.Action)
				}
			}
			os.Remove(filepath.Join(ws, ".git", "objects", "new"))
			if after := guardState(t, ws); after != before {
				t.Errorf("%s: not restored (changes %v)\nbefore:\n%s\nafter:\n%s", name, cs, before, after)
			}
			if m == "content" && tg.kind == "file" {
				if b, err := os.ReadFile(filepath.Join(q, tg.rel)); err != nil || !strings.Contains(string(b), "pwned") {
					t.Errorf("%s: what the run wrote is not in the quarantine: %v", name, err)
				}
			}
			if ChangesNote(cs, q) == "" {
				t.Errorf("%s: no note", name)
			}
			if again := g.Check(q); len(again) != 0 {
				t.Errorf("%s: a second check still finds %v", name, again)
			}
		}
	}
	// Nothing changed: nothing reported, nothing quarantined.
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644)
	q := filepath.Join(t.TempDir(), "q")
	if cs := NewGuard(ws, []string{"f"}).Check(q); len(cs) != 0 {
		t.Fatalf("unchanged: %v", cs)
	}
	if _, err := os.Stat(q); err == nil {
		t.Fatal("unchanged: a quarantine directory was made")
	}
}
